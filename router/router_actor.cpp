#include "router/router_actor.hpp"

#include <caf/io/middleman.hpp>

#include <algorithm>
#include <map>
#include <numeric>

#include "actors/token_outbox.hpp"
#include "router/placement.hpp"
#include "router/tls_transport.hpp"

namespace conveyor {
namespace {

using clock = std::chrono::steady_clock;

struct NodeEntry {
  std::string address;  // host:port, as configured
  std::string host;
  uint16_t port = 0;
  std::string name;     // what it calls itself once described
  enum class State { down, connecting, up, incompatible } state = State::down;
  bool removed = false;  // no longer in the list: finishes its requests, takes no new ones
  node_actor actor;
  caf::node_id nid;
  NodeInfo info;
  EngineStats stats;
  std::string problem;   // why it is down or incompatible
  int32_t in_flight = 0;
  uint64_t routed = 0;
  uint64_t failovers = 0;
  clock::time_point next_connect{};
  clock::time_point last_heard{};  // its last answer while up
  // A connect asked of its connector and not yet answered (it may take
  // minutes against an address that drops packets): no other is asked
  // meanwhile, so none piles up behind it; after kConnectTimeout the node
  // counts as down while the answer is awaited.
  bool connect_in_flight = false;
  clock::time_point connect_started{};
};

constexpr auto kConnectTimeout = std::chrono::seconds(5);

// One try at a request's samples on one node.
struct Attempt {
  std::string node;                  // its address
  request_id node_id = 0;            // the node's id for it, once answered
  std::vector<int32_t> index_map;    // the node's sample index -> the client's
  int32_t open = 0;                  // its samples that have not ended
  bool cancel_pending = false;       // cancelled before the node's answer
};

struct Sample {
  std::vector<int32_t> tokens;  // received so far
  bool done = false;
};

struct Route {
  GenerateRequest request;  // as the client submitted it
  token_sink_actor client;
  std::vector<uint64_t> chain;
  std::vector<Sample> samples;
  std::map<uint64_t, Attempt> attempts;  // by attempt key
  int32_t failovers = 0;
  bool cancelled = false;
};

struct router_state {
  RouterOptions options;
  ModelInfo model;
  std::shared_ptr<RouterMetrics> metrics;
  std::shared_ptr<PlacementPolicy> policy;
  std::vector<NodeEntry> nodes;
  std::unordered_map<request_id, Route> routes;
  // (node address, node's request id) -> (route, attempt key)
  std::map<std::pair<std::string, request_id>, std::pair<request_id, uint64_t>> by_node_id;
  std::map<std::string, uint64_t> routed_by_policy;
  uint64_t next_attempt = 1;
  uint64_t failovers = 0, failed = 0, prompt_blocks = 0, expected_hit_blocks = 0;
  bool forwarding = false;  // a node's TokenBatch is being forwarded (deliver fills outbox)
  TokenOutbox outbox;
  static inline const char* name = "router";
};

using self_ptr = caf::stateful_actor<router_state>*;

// What connects to the node at `address`: a middleman of the node's own
// (tls_transport.hpp says why).
caf::io::middleman_actor connector(self_ptr self, const std::string& address) {
  return node_connector(self->system(), address, self->state.options.tls);
}

NodeEntry* node_by_address(self_ptr self, const std::string& address) {
  for (NodeEntry& n : self->state.nodes)
    if (n.address == address) return &n;
  return nullptr;
}

int32_t block_size(self_ptr self) {
  if (self->state.options.block_size > 0) return self->state.options.block_size;
  for (const NodeEntry& n : self->state.nodes)
    if (n.state == NodeEntry::State::up) return n.info.block_size;
  return 16;
}

bool same_model(const NodeInfo& info, const ModelInfo& model, std::string& why) {
  const ModelConfig& mc = model.config;
  auto differs = [&](const char* what, int64_t node, int64_t ours) {
    why = std::string("serves a different model: ") + what + " " + std::to_string(node) + ", the router's " +
          std::to_string(ours);
    return false;
  };
  if (info.architecture != mc.architecture) {
    why = "serves a different model: architecture " + info.architecture + ", the router's " + mc.architecture;
    return false;
  }
  if (info.vocab_size != mc.vocab_size) return differs("vocabulary", info.vocab_size, mc.vocab_size);
  if (info.dim != mc.dim) return differs("dimension", info.dim, mc.dim);
  if (info.n_layers != mc.n_layers) return differs("layers", info.n_layers, mc.n_layers);
  if (info.context_length != mc.context_length) return differs("context", info.context_length, mc.context_length);
  // The same shape with other weights (another quantization of the file,
  // another fine-tune): outputs would depend on the node.
  if (info.weights_fingerprint != 0 && model.weights_fingerprint != 0 &&
      info.weights_fingerprint != model.weights_fingerprint) {
    why = "serves a different model: the same shape with other weights (another file or quantization)";
    return false;
  }
  return true;
}

void publish_metrics(self_ptr self) {
  auto& st = self->state;
  std::lock_guard lock(st.metrics->mutex);
  st.metrics->nodes.clear();
  for (const NodeEntry& n : st.nodes) {
    RouterMetrics::Node m;
    m.name = n.name.empty() ? n.address : n.name;
    m.address = n.address;
    switch (n.state) {
      case NodeEntry::State::down: m.state = "down"; break;
      case NodeEntry::State::connecting: m.state = "connecting"; break;
      case NodeEntry::State::incompatible: m.state = "incompatible"; break;
      case NodeEntry::State::up: m.state = n.info.draining ? "draining" : "up"; break;
    }
    if (n.removed) m.state = "removed";
    m.in_flight = n.in_flight;
    m.stats = n.stats;
    m.routed = n.routed;
    m.failovers = n.failovers;
    st.metrics->nodes.push_back(std::move(m));
  }
  st.metrics->policy = st.policy->name();
  st.metrics->routed_by_policy.assign(st.routed_by_policy.begin(), st.routed_by_policy.end());
  st.metrics->failovers = st.failovers;
  st.metrics->failed = st.failed;
  st.metrics->prompt_blocks = st.prompt_blocks;
  st.metrics->expected_hit_blocks = st.expected_hit_blocks;
}

// ---- events to the client ------------------------------------------------------

bool all_done(const Route& r) {
  return std::all_of(r.samples.begin(), r.samples.end(), [](const Sample& s) { return s.done; });
}

// Forwards one event for client sample `index` (while a node's batch is
// forwarded, in that batch's outbox, so its clients' events keep their
// order); ends the route after its last.
void deliver(self_ptr self, request_id id, TokenEvent t, int32_t index) {
  auto& st = self->state;
  auto it = st.routes.find(id);
  if (it == st.routes.end()) return;
  Route& r = it->second;
  Sample& s = r.samples[size_t(index)];
  if (s.done) return;
  if (t.token >= 0) s.tokens.push_back(t.token);
  if (t.finish != FinishReason::none) s.done = true;
  t.id = id;
  t.index = index;
  t.request_done = all_done(r);
  if (st.forwarding) st.outbox.add(r.client, std::move(t));
  else self->send(r.client, TokenBatch{{std::move(t)}});
  if (all_done(r)) {
    st.routes.erase(it);
    publish_metrics(self);
  }
}

void end_sample(self_ptr self, request_id id, int32_t index, FinishReason finish, const std::string& message,
                Errc code) {
  auto& st = self->state;
  auto it = st.routes.find(id);
  if (it == st.routes.end()) return;
  TokenEvent t;
  t.token = -1;
  t.finish = finish;
  if (finish == FinishReason::error) t.error_code = code;
  TokenEventDetail& d = t.detail.get_or_make();
  d.message = message;
  d.prompt_tokens = int32_t(it->second.request.prompt.size());
  d.completion_tokens = int32_t(it->second.samples[size_t(index)].tokens.size());
  deliver(self, id, std::move(t), index);
}

// ---- placement and attempts --------------------------------------------------------

void finish_attempt(self_ptr self, Route& r, uint64_t key) {
  auto& st = self->state;
  auto a = r.attempts.find(key);
  if (a == r.attempts.end()) return;
  if (NodeEntry* n = node_by_address(self, a->second.node)) n->in_flight = std::max(0, n->in_flight - 1);
  if (a->second.node_id != 0) st.by_node_id.erase({a->second.node, a->second.node_id});
  r.attempts.erase(a);
}

// `refused`: why the node the request just left would not take it, when
// one would not; with no other node to try, the request ends with that
// (a full queue is 429 queue_full, as from `serve`), not "no node".
void launch(self_ptr self, request_id id, GenerateRequest sub, std::vector<int32_t> index_map,
            std::vector<std::string> exclude, const Error* refused = nullptr);

// The attempt could not start on its node: another node, or an error.
void retry_elsewhere(self_ptr self, request_id id, uint64_t key, const Error& why) {
  auto& st = self->state;
  auto it = st.routes.find(id);
  if (it == st.routes.end()) return;
  Route& r = it->second;
  auto a = r.attempts.find(key);
  if (a == r.attempts.end()) return;
  const std::string node = a->second.node;
  const std::vector<int32_t> index_map = a->second.index_map;
  finish_attempt(self, r, key);
  GenerateRequest sub = r.request;
  if (index_map.size() == 1 && r.request.n > 1) {  // one sample of several: rebuild its request
    const int32_t i = index_map[0];
    sub.n = 1;
    if (sub.sampling.has_seed) sub.sampling.seed += uint64_t(i);
    sub.resume = r.samples[size_t(i)].tokens;
    sub.session.clear();
  } else if (index_map.size() == 1) {
    sub.resume = r.samples[0].tokens;
  }
  const bool retryable = why.code == Errc::io_error || why.code == Errc::resource_exhausted;
  if (!retryable || r.cancelled || ++r.failovers > st.options.max_failovers) {
    const FinishReason f = r.cancelled ? FinishReason::cancelled : FinishReason::error;
    for (int32_t i : index_map) end_sample(self, id, i, f, why.message, why.code);
    return;
  }
  launch(self, id, std::move(sub), index_map, {node}, &why);
}

void launch(self_ptr self, request_id id, GenerateRequest sub, std::vector<int32_t> index_map,
            std::vector<std::string> exclude, const Error* refused) {
  auto& st = self->state;
  auto it = st.routes.find(id);
  if (it == st.routes.end()) return;
  Route& r = it->second;

  PlacementQuery q;
  q.chain = r.chain;
  std::vector<NodeEntry*> candidates;
  for (NodeEntry& n : st.nodes) {
    if (n.state != NodeEntry::State::up || n.removed || n.info.draining) continue;
    if (std::find(exclude.begin(), exclude.end(), n.address) != exclude.end()) continue;
    candidates.push_back(&n);
    NodeLoad load;
    load.name = n.address;  // the policy's key: names may repeat, addresses do not
    load.in_flight = n.in_flight;
    load.running = n.stats.num_running;
    load.waiting = n.stats.num_waiting;
    load.kv_usage = n.stats.blocks.total > 0 ? double(n.stats.blocks.used) / n.stats.blocks.total : 0.0;
    load.num_blocks = n.info.num_blocks;
    q.nodes.push_back(std::move(load));
  }
  if (candidates.empty()) {
    ++st.failed;
    const bool full = refused != nullptr && refused->code == Errc::resource_exhausted;
    const Error why = full ? *refused : Error{Errc::io_error, "no engine node is available to take the request"};
    for (int32_t i : index_map) end_sample(self, id, i, FinishReason::error, why.message, why.code);
    return;
  }
  NodeEntry& node = *candidates[st.policy->place(q)];
  if (r.attempts.empty() && r.failovers == 0) {  // count the request once, at its first placement
    st.prompt_blocks += r.chain.size();
    st.expected_hit_blocks += uint64_t(st.policy->expected_hits(node.address, r.chain));
    ++st.routed_by_policy[st.policy->name()];
  }
  st.policy->placed(node.address, r.chain);
  ++node.routed;
  ++node.in_flight;

  publish_metrics(self);
  const uint64_t key = st.next_attempt++;
  Attempt& a = r.attempts[key];
  a.node = node.address;
  a.index_map = index_map;
  a.open = int32_t(index_map.size());
  const std::string address = node.address;
  self->request(node.actor, std::chrono::seconds(30), submit_atom_v, std::move(sub), caf::actor_cast<caf::actor>(self))
      .then(
          [self, id, key, address](request_id node_id) {
            auto& st = self->state;
            auto it = st.routes.find(id);
            if (it == st.routes.end()) return;
            auto a = it->second.attempts.find(key);
            if (a == it->second.attempts.end()) return;
            a->second.node_id = node_id;
            st.by_node_id[{address, node_id}] = {id, key};
            if (a->second.cancel_pending) {
              if (NodeEntry* n = node_by_address(self, address)) self->send(n->actor, cancel_atom_v, node_id);
            }
          },
          [self, id, key](caf::error& err) { retry_elsewhere(self, id, key, from_caf_error(err)); });
}

// Moves every request on `address` to other nodes (the node died).
void fail_over(self_ptr self, const std::string& address) {
  auto& st = self->state;
  std::vector<std::pair<request_id, uint64_t>> lost;
  for (auto& [id, r] : st.routes)
    for (auto& [key, a] : r.attempts)
      if (a.node == address) lost.emplace_back(id, key);
  NodeEntry* node = node_by_address(self, address);
  for (auto [id, key] : lost) {
    // An earlier entry may have ended the route (its last samples ended here).
    auto found = st.routes.find(id);
    if (found == st.routes.end() || !found->second.attempts.count(key)) continue;
    Route& r = found->second;
    const Attempt a = r.attempts.at(key);
    finish_attempt(self, r, key);
    ++st.failovers;
    if (node != nullptr) ++node->failovers;
    if (r.cancelled) {
      for (int32_t i : a.index_map) end_sample(self, id, i, FinishReason::cancelled, "", Errc::invalid_argument);
      continue;
    }
    if (++r.failovers > st.options.max_failovers) {
      for (int32_t i : a.index_map)
        end_sample(self, id, i, FinishReason::error, "the request's engine nodes failed " +
                   std::to_string(st.options.max_failovers) + " times", Errc::io_error);
      continue;
    }
    std::vector<int32_t> open;
    for (int32_t i : a.index_map)
      if (!r.samples[size_t(i)].done) open.push_back(i);
    const bool begun = std::any_of(open.begin(), open.end(), [&](int32_t i) { return !r.samples[size_t(i)].tokens.empty(); });
    if (open.size() > 1 && !begun && open.size() == size_t(r.request.n)) {  // n > 1, nothing sampled yet
      launch(self, id, r.request, open, {});
      continue;
    }
    for (int32_t i : open) {
      auto still = st.routes.find(id);  // end_sample below may end the route
      if (still == st.routes.end()) break;
      const Route& route = still->second;
      const Sample& s = route.samples[size_t(i)];
      GenerateRequest sub = route.request;
      sub.n = 1;
      if (route.request.n > 1) {
        if (sub.sampling.has_seed) sub.sampling.seed += uint64_t(i);
        sub.session.clear();
      }
      sub.resume = s.tokens;
      // It may have ended with its last token before the final event came.
      const int32_t max_tokens = std::min(sub.sampling.max_tokens,
                                          st.model.config.context_length - int32_t(sub.prompt.size()));
      if (!s.tokens.empty()) {
        const int32_t last = s.tokens.back();
        const auto& eos = st.model.eos_ids;
        const auto& stops = sub.sampling.stop_token_ids;
        const bool stop_token = std::find(stops.begin(), stops.end(), last) != stops.end() ||
                                (!sub.sampling.ignore_eos && std::find(eos.begin(), eos.end(), last) != eos.end());
        if (stop_token) {
          end_sample(self, id, i, FinishReason::stop, "", Errc::invalid_argument);
          continue;
        }
      }
      if (int32_t(s.tokens.size()) >= max_tokens) {
        end_sample(self, id, i, FinishReason::length, "", Errc::invalid_argument);
        continue;
      }
      launch(self, id, std::move(sub), {i}, {});
    }
  }
}

// ---- nodes ---------------------------------------------------------------------------

void tell(self_ptr self, const std::string& message, bool warning) {
  if (self->state.options.on_node_change) self->state.options.on_node_change(message, warning);
}

std::string named(const NodeEntry& n) {
  return n.name.empty() || n.name == n.address ? "node " + n.address : "node " + n.name + " (" + n.address + ")";
}

void node_down(self_ptr self, NodeEntry& n, const std::string& why) {
  const bool was_up = n.state == NodeEntry::State::up;
  if (was_up) {
    tell(self, named(n) + " is down: " + why + "; its requests move to other nodes", true);
    self->state.policy->forget(n.address);  // back up, its prefix cache is empty
  } else if (n.problem != why) {  // once per reason, not at every reconnection
    tell(self, named(n) + " cannot be reached: " + why, true);
  }
  if (n.actor) self->demonitor(n.actor.address());
  n.actor = nullptr;
  n.nid = caf::node_id{};
  n.state = NodeEntry::State::down;
  n.problem = why;
  n.stats = EngineStats{};
  n.next_connect = clock::now() + std::chrono::seconds(1);
  if (was_up) fail_over(self, n.address);
}

// An up node that answered nothing for node_timeout_seconds: its requests
// are cancelled there (it may wake up) and moved elsewhere, as for a death.
void node_hung(self_ptr self, NodeEntry& n) {
  auto& st = self->state;
  const auto silent = std::chrono::duration<double>(clock::now() - n.last_heard).count();
  for (const auto& [id, r] : st.routes)
    for (const auto& [key, a] : r.attempts)
      if (a.node == n.address && a.node_id != 0) self->send(n.actor, cancel_atom_v, a.node_id);
  char why[96];
  std::snprintf(why, sizeof why, "no answer for %.1f s (--node-timeout %.1f)", silent,
                st.options.node_timeout_seconds);
  node_down(self, n, why);
}

void connect(self_ptr self, NodeEntry& n) {
  n.state = NodeEntry::State::connecting;
  n.connect_in_flight = true;
  n.connect_started = clock::now();
  const std::string address = n.address;
  self->request(connector(self, address), caf::infinite, caf::connect_atom_v, n.host, n.port)
      .then(
          [self, address](const caf::node_id& nid, caf::strong_actor_ptr& ptr, const std::set<std::string>&) {
            NodeEntry* n = node_by_address(self, address);
            if (n != nullptr) n->connect_in_flight = false;
            // Too late (counted down meanwhile): the next connect finds
            // the connection in the connector's cache.
            if (n == nullptr || n->state != NodeEntry::State::connecting) return;
            if (!ptr) return node_down(self, *n, "nothing is published on that port");
            auto actor = caf::actor_cast<node_actor>(ptr);
            self->request(actor, std::chrono::seconds(5), describe_atom_v)
                .then(
                    [self, address, nid, actor](const NodeInfo& info) {
                      NodeEntry* n = node_by_address(self, address);
                      if (n == nullptr || n->state != NodeEntry::State::connecting) return;
                      n->info = info;
                      n->name = info.name.empty() ? address : info.name;
                      std::string why;
                      if (!same_model(info, self->state.model, why)) {
                        if (n->problem != why) tell(self, named(*n) + " is refused: " + why, true);
                        n->state = NodeEntry::State::incompatible;
                        n->problem = why;
                        n->next_connect = clock::now() + std::chrono::seconds(5);
                        return;
                      }
                      n->actor = actor;
                      n->nid = nid;
                      n->state = NodeEntry::State::up;
                      n->last_heard = clock::now();
                      n->problem.clear();
                      tell(self, named(*n) + " is up", false);
                      self->monitor(actor);
                    },
                    [self, address](caf::error& err) {
                      if (NodeEntry* n = node_by_address(self, address))
                        node_down(self, *n, to_string(err));
                    });
          },
          [self, address](caf::error& err) {
            NodeEntry* n = node_by_address(self, address);
            if (n == nullptr) return;
            n->connect_in_flight = false;
            if (n->state != NodeEntry::State::connecting) return;  // counted down already
            std::string why = to_string(err);
            // A node with TLS closes a plain peer's connection at once.
            if (!self->state.options.tls && why.find("disconnect_during_handshake") != std::string::npos)
              why += " (if the node runs with --tls-*, so must the router)";
            node_down(self, *n, why);
          });
}

bool parse_address(const std::string& address, std::string& host, uint16_t& port) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0) return false;
  host = address.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  try {
    size_t used = 0;
    const int p = std::stoi(address.substr(colon + 1), &used);
    if (used != address.size() - colon - 1 || p < 1 || p > 65535) return false;
    port = uint16_t(p);
  } catch (...) {
    return false;
  }
  return true;
}

// Removed nodes go once their requests have ended (they finish them first).
void drop_removed_nodes(self_ptr self) {
  std::erase_if(self->state.nodes, [self](const NodeEntry& n) {
    if (!n.removed || n.in_flight > 0) return false;
    if (n.actor) self->demonitor(n.actor.address());
    release_node_connector(self->system(), n.address);  // its thread ends
    return true;
  });
}

void set_nodes(self_ptr self, const std::vector<std::string>& addresses) {
  auto& st = self->state;
  for (NodeEntry& n : st.nodes)
    n.removed = std::find(addresses.begin(), addresses.end(), n.address) == addresses.end();
  for (const std::string& address : addresses) {
    if (node_by_address(self, address)) continue;
    NodeEntry n;
    n.address = address;
    if (!parse_address(address, n.host, n.port)) continue;  // checked by parse_node_list before
    st.nodes.push_back(std::move(n));
  }
  drop_removed_nodes(self);
}

void tick(self_ptr self) {
  auto& st = self->state;
  const auto now = clock::now();
  drop_removed_nodes(self);
  for (NodeEntry& n : st.nodes) {
    if (n.state == NodeEntry::State::connecting && n.connect_in_flight && now - n.connect_started > kConnectTimeout) {
      node_down(self, n, "no connection within " + std::to_string(kConnectTimeout.count()) + " s");
      continue;
    }
    if ((n.state == NodeEntry::State::down || n.state == NodeEntry::State::incompatible) && !n.removed &&
        !n.connect_in_flight && now >= n.next_connect) {
      connect(self, n);
      continue;
    }
    if (n.state != NodeEntry::State::up) continue;
    if (now - n.last_heard > std::chrono::duration<double>(st.options.node_timeout_seconds)) {
      node_hung(self, n);
      continue;
    }
    const std::string address = n.address;
    const auto timeout = std::chrono::seconds(5);
    self->request(n.actor, timeout, stats_atom_v)
        .then(
            [self, address](const EngineStats& stats) {
              if (NodeEntry* n = node_by_address(self, address)) {
                n->stats = stats;
                n->last_heard = clock::now();
              }
            },
            [](caf::error&) {});  // a dead node's monitor says so, a hung one's silence
    self->request(n.actor, timeout, describe_atom_v)
        .then(
            [self, address](const NodeInfo& info) {
              if (NodeEntry* n = node_by_address(self, address)) n->info.draining = info.draining;
            },
            [](caf::error&) {});
  }
  publish_metrics(self);
  self->delayed_send(self, std::chrono::milliseconds(int64_t(st.options.poll_seconds * 1000)), tick_atom_v);
}

EngineStats total_stats(self_ptr self) {
  EngineStats t;
  for (const NodeEntry& n : self->state.nodes) {
    if (n.state != NodeEntry::State::up) continue;
    const EngineStats& s = n.stats;
    t.num_waiting += s.num_waiting;
    t.num_running += s.num_running;
    t.num_swapped += s.num_swapped;
    t.iterations += s.iterations;
    t.preemptions_recompute += s.preemptions_recompute;
    t.preemptions_swap += s.preemptions_swap;
    t.prefix_waits += s.prefix_waits;
    t.spec_drafts += s.spec_drafts;
    t.spec_draft_tokens += s.spec_draft_tokens;
    t.spec_accepted_tokens += s.spec_accepted_tokens;
    t.sessions_held += s.sessions_held;
    t.session_blocks += s.session_blocks;
    t.prompt_tokens += s.prompt_tokens;
    t.computed_tokens += s.computed_tokens;
    t.generated_tokens += s.generated_tokens;
    t.forward_seconds += s.forward_seconds;
    t.blocks.total += s.blocks.total;
    t.blocks.used += s.blocks.used;
    t.blocks.free += s.blocks.free;
    t.blocks.cached += s.blocks.cached;
    t.blocks.host_total += s.blocks.host_total;
    t.blocks.host_used += s.blocks.host_used;
    t.blocks.prefix_queries += s.blocks.prefix_queries;
    t.blocks.prefix_hits += s.blocks.prefix_hits;
    t.blocks.prefix_query_tokens += s.blocks.prefix_query_tokens;
    t.blocks.prefix_hit_tokens += s.blocks.prefix_hit_tokens;
    t.blocks.cow_copies += s.blocks.cow_copies;
  }
  return t;
}

caf::behavior router(self_ptr self, RouterOptions options, ModelInfo model, std::shared_ptr<RouterMetrics> metrics,
                     std::shared_ptr<PlacementPolicy> policy) {
  auto& st = self->state;
  st.options = std::move(options);
  st.model = std::move(model);
  st.metrics = std::move(metrics);
  st.policy = std::move(policy);
  set_nodes(self, st.options.nodes);
  self->set_down_handler([self](const caf::down_msg& down) {
    for (NodeEntry& n : self->state.nodes)
      if (n.actor && n.actor.address() == down.source) return node_down(self, n, to_string(down.reason));
  });
  self->set_exit_handler([self](const caf::exit_msg& msg) {
    // Requests in flight end with an error (as an engine's do when it stops).
    auto& st = self->state;
    for (auto& [id, r] : st.routes) {
      for (auto& [key, a] : r.attempts)
        if (NodeEntry* n = node_by_address(self, a.node); n && n->actor && a.node_id)
          self->send(n->actor, cancel_atom_v, a.node_id);
      TokenEvent t;
      t.id = id;
      t.token = -1;
      t.finish = FinishReason::error;
      t.error_code = Errc::io_error;
      t.detail.get_or_make().message = "the router stopped";
      t.request_done = true;
      self->send(r.client, TokenBatch{{std::move(t)}});
    }
    st.routes.clear();
    self->quit(msg.reason);
  });
  self->send(self, tick_atom_v);
  return {
      [self](submit_atom, GenerateRequest& request, token_sink_actor& client) -> caf::result<request_id> {
        auto& st = self->state;
        if (request.n < 1 || request.n > kMaxSamples)
          return make_engine_error(make_error(Errc::invalid_argument, "n must be between 1 and " +
                                                                          std::to_string(kMaxSamples)));
        if (st.routes.count(request.id)) return make_engine_error(make_error(Errc::invalid_argument, "duplicate request id"));
        const request_id id = request.id;
        Route& r = st.routes[id];
        r.request = std::move(request);
        r.client = std::move(client);
        r.chain = prefix_chain(r.request.prompt, block_size(self));
        r.samples.resize(size_t(r.request.n));
        std::vector<int32_t> all(size_t(r.request.n));
        std::iota(all.begin(), all.end(), 0);
        launch(self, id, r.request, std::move(all), {});
        return id;
      },
      [self](cancel_atom, request_id id) {
        auto& st = self->state;
        auto it = st.routes.find(id);
        if (it == st.routes.end()) return;
        it->second.cancelled = true;
        for (auto& [key, a] : it->second.attempts) {
          if (a.node_id == 0) {
            a.cancel_pending = true;
          } else if (NodeEntry* n = node_by_address(self, a.node); n && n->actor) {
            self->send(n->actor, cancel_atom_v, a.node_id);
          }
        }
      },
      [self](cancel_atom, request_id id, int32_t index) {
        auto& st = self->state;
        auto it = st.routes.find(id);
        if (it == st.routes.end()) return;
        for (auto& [key, a] : it->second.attempts) {
          auto pos = std::find(a.index_map.begin(), a.index_map.end(), index);
          if (pos == a.index_map.end()) continue;
          NodeEntry* n = node_by_address(self, a.node);
          if (n == nullptr || !n->actor || a.node_id == 0) continue;  // it ends with the request
          if (a.index_map.size() == 1) self->send(n->actor, cancel_atom_v, a.node_id);
          else self->send(n->actor, cancel_atom_v, a.node_id, int32_t(pos - a.index_map.begin()));
        }
      },
      [self](TokenBatch& batch) {
        auto& st = self->state;
        const caf::strong_actor_ptr& sender = self->current_sender();
        if (!sender) return;
        std::string address;
        for (const NodeEntry& n : st.nodes)
          if (n.actor && n.nid == sender->node()) address = n.address;
        st.forwarding = true;  // the node's iteration goes on as one batch per client
        for (TokenEvent& t : batch.events) {
          auto at = st.by_node_id.find({address, t.id});
          if (at == st.by_node_id.end()) continue;  // an attempt given up on
          const auto [id, key] = at->second;
          auto it = st.routes.find(id);
          if (it == st.routes.end()) continue;
          auto a = it->second.attempts.find(key);
          if (a == it->second.attempts.end() || t.index < 0 || size_t(t.index) >= a->second.index_map.size()) continue;
          const int32_t index = a->second.index_map[size_t(t.index)];
          const bool last = t.finish != FinishReason::none;
          if (last && --a->second.open == 0) finish_attempt(self, it->second, key);
          deliver(self, id, std::move(t), index);
        }
        st.forwarding = false;
        st.outbox.flush(self);
      },
      [self](stats_atom) { return total_stats(self); },
      [self](session_atom, const std::string& name) {
        for (NodeEntry& n : self->state.nodes)
          if (n.state == NodeEntry::State::up) self->send(n.actor, session_atom_v, name);
      },
      [self](policy_atom, const std::string& name) -> caf::result<void> {
        auto policy = make_placement_policy(name);
        if (!policy) return make_engine_error(policy.error());
        self->state.policy = std::move(policy).value();
        publish_metrics(self);
        return caf::unit;
      },
      // An engine's policies have no meaning here: each node has its own.
      [self](policy_atom, admission_actor& a) { self->send_exit(a, caf::exit_reason::user_shutdown); },
      [self](policy_atom, preemption_actor& p) { self->send_exit(p, caf::exit_reason::user_shutdown); },
      [](wake_atom) {},
      [self](nodes_atom, const std::vector<std::string>& addresses) { set_nodes(self, addresses); },
      [self](tick_atom) { tick(self); },
  };
}

}  // namespace

Expected<std::vector<std::string>> parse_node_list(const std::string& list) {
  std::vector<std::string> out;
  size_t begin = 0;
  while (begin <= list.size()) {
    size_t end = list.find_first_of(",\n", begin);
    if (end == std::string::npos) end = list.size();
    std::string item = list.substr(begin, end - begin);
    const size_t a = item.find_first_not_of(" \t\r");
    const size_t b = item.find_last_not_of(" \t\r");
    item = a == std::string::npos ? "" : item.substr(a, b - a + 1);
    if (!item.empty() && item.front() != '#') {
      std::string host;
      uint16_t port = 0;
      if (!parse_address(item, host, port))
        return make_error(Errc::invalid_argument, "node address '" + item + "' is not host:port");
      if (std::find(out.begin(), out.end(), item) == out.end()) out.push_back(item);
    }
    begin = end + 1;
  }
  return out;
}

Expected<caf::actor> spawn_router(caf::actor_system& sys, RouterOptions options, ModelInfo model,
                                  std::shared_ptr<RouterMetrics> metrics) {
  auto policy = make_placement_policy(options.policy);
  if (!policy) return policy.error();
  for (const std::string& address : options.nodes) {
    std::string host;
    uint16_t port = 0;
    if (!parse_address(address, host, port))
      return make_error(Errc::invalid_argument, "node address '" + address + "' is not host:port");
  }
  std::shared_ptr<PlacementPolicy> p = std::move(policy).value();
  return caf::actor(sys.spawn(router, std::move(options), std::move(model), std::move(metrics), std::move(p)));
}

}  // namespace conveyor
