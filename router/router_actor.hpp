// The router actor: one engine's face (the scheduler's interface, so an
// Engine built with Engine::over serves HTTP through it unchanged) over
// engine nodes on other machines (actors/node.hpp), reached through CAF's
// middleman.
//
//   stream actor ──submit──▶ router ──submit(sink = router)──▶ node ──▶ its scheduler
//   node's scheduler ──TokenBatch──▶ router ──TokenBatch──▶ stream actor
//
// Text, stop strings and latency metrics stay in the router's stream
// actors; nodes send token events, one batch per iteration. Every request's tokens so far are kept
// here, so that when a node dies (its monitor fires: the process was killed,
// the connection was lost) each of its requests is resubmitted to another
// node with them as GenerateRequest::resume: the new node recomputes prompt
// and tokens, its sampler replays them (a seeded request continues at the
// same generator position: its ids equal an undisturbed run's), and the
// client's stream goes on with no gap and no duplicate. A request with n > 1
// whose samples had begun continues as one request per unfinished sample,
// sample i with seed + i, as the engine seeds it. Tokens a node generated
// but had not sent when it died are generated again; without a seed they
// may differ from what the dead node would have sent, never from what the
// client saw.
//
// Nodes: the router connects to each address (RouterOptions::nodes, or
// nodes_atom with a new list), asks what it serves (describe) and refuses a
// node whose model differs from its own (architecture, shape, or weights by
// their fingerprint: ModelInfo::weights_fingerprint); it asks every node's statistics
// every poll interval (the load placement uses, and /metrics), reconnects
// to nodes that went away, and stops placing on draining or removed ones.
// A node whose connection stays open but which answers nothing for
// node_timeout_seconds (stopped, hung, cut off without a reset) is taken for
// dead as if its monitor had fired: its requests move to other nodes, and
// the ones it still holds are cancelled there in case it wakes up.
// Placement: router/placement.hpp, replaced at run time by policy_atom with
// a policy's name.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "actors/messages.hpp"
#include "actors/engine.hpp"

CAF_BEGIN_TYPE_ID_BLOCK(conveyor_router, caf::id_block::conveyor_engine::end)
  CAF_ADD_TYPE_ID(conveyor_router, (std::vector<std::string>))  // a node list
  CAF_ADD_ATOM(conveyor_router, conveyor, nodes_atom, "nodes")  // replace the node list
  CAF_ADD_ATOM(conveyor_router, conveyor, tick_atom, "tick")    // poll and reconnect
CAF_END_TYPE_ID_BLOCK(conveyor_router)

namespace conveyor {

struct RouterOptions {
  std::vector<std::string> nodes;         // host:port
  std::string policy = "prefix_affinity";
  int32_t block_size = 0;                 // for prefix chains; 0: the first node's
  double poll_seconds = 0.25;             // statistics and reconnection
  double node_timeout_seconds = 10.0;     // an up node silent this long (no statistics) is taken for dead
  int32_t max_failovers = 8;              // resubmissions of one request before it fails
  bool tls = false;                       // connect through CAF's OpenSSL module
  // Told when a node comes up or goes down, and why, for the operator's log
  // (warning: true when it went down). Called on the router actor's thread.
  std::function<void(const std::string& message, bool warning)> on_node_change;
};

// What /metrics shows of the router (the actor writes it, the server reads it).
struct RouterMetrics {
  struct Node {
    std::string name, address, state;  // state: connecting, up, draining, incompatible, down, removed
    int32_t in_flight = 0;
    EngineStats stats;
    uint64_t routed = 0;
    uint64_t failovers = 0;            // requests moved off it when it died
  };
  mutable std::mutex mutex;
  std::vector<Node> nodes;
  std::string policy;
  std::vector<std::pair<std::string, uint64_t>> routed_by_policy;
  uint64_t failovers = 0;              // resubmissions after a node died
  uint64_t failed = 0;                 // requests ended because no node could take them
  uint64_t prompt_blocks = 0;          // full prompt blocks of routed requests (prefix chains)
  uint64_t expected_hit_blocks = 0;    // of which the policy expected the chosen node to hold

  // Prometheus text (conveyor:router_*), appended to the server's /metrics.
  std::string render() const;
  // Some node is up (the router's /health).
  bool any_node_up() const;
};

// Node addresses (host:port, [v6]:port) separated by commas or lines; blank
// lines and lines starting with # are skipped (a --nodes-file).
Expected<std::vector<std::string>> parse_node_list(const std::string& list);

// `model` is what the router serves (nodes must match it). The returned
// actor has the scheduler's interface, plus nodes_atom (a new address list)
// and policy_atom with a policy's name.
Expected<caf::actor> spawn_router(caf::actor_system& sys, RouterOptions options, ModelInfo model,
                                  std::shared_ptr<RouterMetrics> metrics);

}  // namespace conveyor
