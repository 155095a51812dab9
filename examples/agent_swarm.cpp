// An agent swarm: many agents, each in a multi-turn loop over the same long
// system prompt (prompt, generate a tool call, run the tool, append its
// answer, go on), all at once. What it shows is the engine under the load
// agents make: many requests that share a prefix, arriving together, each
// turn's prompt the previous one's plus a little, each asking for a tool call.
//
//   build-dir/examples/agent_swarm [--agents 256] [--turns 3] [--system-tokens 300]
//       [--tool-choice required|named|alternate|auto|off] [--max-tokens N]
//       [--model MODEL] [--prefix-wait true|false] [--sessions true|false] [--kv-tokens N]
//   build-dir/examples/agent_swarm --mode http --url http://127.0.0.1:8000
//
// Every agent declares two tools with JSON-schema parameters, calc(op, a, b)
// and lookup(city, days), and each turn asks for a call with tool_choice
// "required", a named function, or "auto" (--tool-choice). The call is
// checked against the tool's schema (examples/swarm_tools.hpp) and the
// share of turns that made a valid one is reported: with a forced call the
// output is constrained by the tool-call grammar, so it is 100% even on
// random weights; with auto the model may answer in text, counted as such.
// --tool-choice off is the older loop for models without a tokenizer: token
// ids, with a call derived from each output (examples/swarm_agent.hpp).
//
// In-process (the default) the agents submit to an Engine of this program,
// each turn from the callback that ends the turn before, with what the
// server would do done here: the model's chat template renders the tools,
// the tool-call grammar constrains the output, the server's parser reads the
// calls (examples/swarm_planner.hpp). Over HTTP each agent keeps a
// connection to `conveyor serve` and sends /v1/chat/completions with
// `tools`, `tool_choice` and the message history (examples/swarm_http.hpp). It prints a progress line while the
// agents run, then agent 0's turns, the valid calls' share, the throughput,
// time to first token and end-to-end latency percentiles per turn request,
// and the prefix cache's hit rate (from Engine::stats() or the server's
// /metrics). With --json FILE it also writes those figures and every turn
// request's TTFT and end-to-end time, in the form `conveyor bench --report
// DIR --add-figures FILE` takes.
#include <CLI/CLI.hpp>
#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <thread>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <string>

#include "actors/engine.hpp"
#include "base/cli_checks.hpp"
#include "examples/swarm_agent.hpp"
#include "examples/swarm_http.hpp"
#include "examples/swarm_planner.hpp"
#include "examples/swarm_tools.hpp"

using namespace conveyor;
using namespace conveyor::examples::swarm;

namespace {

struct Options {
  std::string mode = "inprocess";
  std::string url = "http://127.0.0.1:8000";
  std::string model;  // in-process: the model to load; over HTTP: the "model" field
  std::string api_key;
  int agents = 256;
  int turns = 3;
  int system_tokens = 300;
  std::string tool_choice = "required";  // or named | alternate | auto | off (no tools: token ids)
  int max_tokens = 0;  // 0: 128 with tools (the longest call), 16 without
  bool tools() const { return tool_choice != "off"; }
  double temperature = 1.0;
  bool prefix_wait = true;
  bool sessions = false;  // each agent's requests name its session: the engine keeps its KV between turns
  int tool_ms = 0;        // in-process: how long the tool takes (the agent waits before its next turn)
  int background = 0;     // in-process: unrelated requests kept running while the agents work
  int64_t kv_tokens = 0;  // 0: enough for every agent's whole conversation, unshared
  int timeout_seconds = 600;
  std::string json_out;  // empty: no JSON
};

// --json: {"source", "model", "figures": {...}, "ttft_ms": [...], "e2e_ms": [...]}.
// `cache` holds the mode's prefix-cache figures. False when FILE cannot be written.
bool write_json(const Options& o, const std::string& model, const std::vector<std::unique_ptr<Agent>>& agents,
                double seconds, json::object cache) {
  json::array ttft, e2e;
  std::vector<double> ttft_s, e2e_s;
  int64_t tokens = 0;
  int finished = 0;
  for (const auto& a : agents) {
    finished += a->turns_done() == o.turns;
    for (const TurnRecord& r : a->records()) {
      if (r.ttft >= 0) {
        ttft.push_back(1e3 * r.ttft);
        ttft_s.push_back(r.ttft);
      }
      e2e.push_back(1e3 * r.e2e);
      e2e_s.push_back(r.e2e);
      tokens += r.tokens;
    }
  }
  json::object figures{
      {"mode", o.mode},
      {"tool_choice", o.tool_choice},
      {"prefix_wait", o.mode == "http" ? "the server's" : (o.prefix_wait ? "true" : "false")},
      {"agents", o.agents},
      {"turns", o.turns},
      {"agents_finished", finished},
      {"seconds", seconds},
      {"generated_tokens", tokens},
      {"throughput_tok_s", double(tokens) / std::max(seconds, 1e-9)},
      {"ttft_p50_ms", 1e3 * percentile(ttft_s, 0.5)},
      {"ttft_p90_ms", 1e3 * percentile(ttft_s, 0.9)},
      {"ttft_p99_ms", 1e3 * percentile(ttft_s, 0.99)},
      {"e2e_p50_ms", 1e3 * percentile(e2e_s, 0.5)},
      {"e2e_p90_ms", 1e3 * percentile(e2e_s, 0.9)},
      {"e2e_p99_ms", 1e3 * percentile(e2e_s, 0.99)},
  };
  for (auto& [k, v] : cache) figures[k] = std::move(v);
  if (o.tools()) {
    for (auto& [k, v] : call_share_figures(agents)) figures[k] = std::move(v);
  }
  const json::object out{{"source", "examples/agent_swarm"},
                         {"model", model},
                         {"figures", std::move(figures)},
                         {"ttft_ms", std::move(ttft)},
                         {"e2e_ms", std::move(e2e)}};
  std::ofstream f(o.json_out, std::ios::binary | std::ios::trunc);
  f << json::serialize(out) << "\n";
  if (!f) std::fprintf(stderr, "--json %s: cannot write\n", o.json_out.c_str());
  return bool(f);
}

// The agents of --tool-choice off, sharing one system prompt of
// `system_tokens` token ids (cut to what leaves room for every turn within
// `context`, with a note).
std::vector<std::unique_ptr<Agent>> make_token_agents(const Options& o, const Encoder& encode, int context) {
  const int budget = system_token_budget(context, o.turns, o.max_tokens);
  int system_tokens = o.system_tokens;
  if (budget < system_tokens) {
    std::printf("note: the system prompt is cut to %d tokens to leave room for %d turns of %d tokens within the "
                "context of %d\n", budget, o.turns, o.max_tokens, context);
    system_tokens = budget;
  }
  const std::vector<int32_t> system = system_prompt(encode, system_tokens);
  std::vector<std::unique_ptr<Agent>> agents;
  for (int i = 0; i < o.agents; ++i) agents.push_back(std::make_unique<TokenAgent>(i, system, encode, o.turns));
  std::printf("swarm: %d agents x %d turns, a shared system prompt of %zu tokens, %d tokens a turn\n", o.agents,
              o.turns, system.size(), o.max_tokens);
  return agents;
}

// The agents that call tools, sharing the system text that makes agent 0's
// first prompt (system text, tools, task) at most `system_tokens` tokens and
// leaves room for every turn within `context`. Empty (and the reason printed)
// when nothing fits.
std::vector<std::unique_ptr<Agent>> make_tool_agents(const Options& o, const PromptCounter& count, int context,
                                                     SharedPrompt& shared) {
  const ChoicePolicy policy = *parse_choice_policy(o.tool_choice);
  shared = fit_system_prompt(count, policy, context, o.turns, o.max_tokens, o.system_tokens);
  if (!shared.error.empty()) {
    std::fprintf(stderr, "%s\n", shared.error.c_str());
    return {};
  }
  if (shared.first_tokens > o.system_tokens) {
    std::printf("note: the tools and the task alone make a first prompt of %d tokens, more than --system-tokens %d\n",
                shared.first_tokens, o.system_tokens);
  }
  std::vector<std::unique_ptr<Agent>> agents;
  for (int i = 0; i < o.agents; ++i) agents.push_back(std::make_unique<ToolAgent>(i, o.turns, policy, shared.system));
  std::printf("swarm: %d agents x %d turns, tools calc and lookup, tool_choice %s, a first prompt of %d tokens "
              "(system text, tools, task), at most %d tokens a turn\n",
              o.agents, o.turns, o.tool_choice.c_str(), shared.first_tokens, o.max_tokens);
  return agents;
}

// ---- in-process -------------------------------------------------------------------

// Runs jobs at their time on a thread of its own (a slow tool's answer
// arriving later), so that actor threads never sleep.
class Later {
 public:
  Later() : thread_([this] { run(); }) {}
  ~Later() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void post(Clock::time_point at, std::function<void()> job) {
    {
      std::lock_guard lock(mutex_);
      jobs_.emplace(at, std::move(job));
    }
    cv_.notify_all();
  }

 private:
  void run() {
    std::unique_lock lock(mutex_);
    while (!stop_) {
      if (jobs_.empty()) {
        cv_.wait(lock);
        continue;
      }
      const auto at = jobs_.begin()->first;
      if (Clock::now() < at) {
        cv_.wait_until(lock, at);
        continue;
      }
      auto job = std::move(jobs_.begin()->second);
      jobs_.erase(jobs_.begin());
      lock.unlock();
      job();
      lock.lock();
    }
  }

  std::mutex mutex_;
  std::condition_variable cv_;
  std::multimap<Clock::time_point, std::function<void()>> jobs_;
  bool stop_ = false;
  std::thread thread_;  // last: starts once the rest exists
};

// Drives the agents on an Engine: each turn is submitted from the callback
// that ended the agent's turn before (callbacks run on actor threads, one
// request's events in order, so one agent is never touched by two at once).
// With a ToolPlanner the agents are ToolAgents, else TokenAgents.
class InProcessSwarm {
 public:
  InProcessSwarm(Engine& engine, const Options& o, std::vector<std::unique_ptr<Agent>>& agents, Counters& counters,
                 ToolPlanner* planner)
      : engine_(engine), options_(o), agents_(agents), counters_(counters), planner_(planner) {}

  void start() {
    for (int i = 0; i < options_.background; ++i) start_background(background_, engine_, i);
    for (auto& agent : agents_) start_turn(*agent);
  }

  // The agents' own turns: prompt tokens, and those found in the prefix cache.
  int64_t agent_prompt_tokens() const { return agent_prompt_tokens_; }
  int64_t agent_cached_tokens() const { return agent_cached_tokens_; }

  // Waits until every agent has finished or failed; false on timeout.
  bool wait(std::chrono::seconds timeout) {
    std::unique_lock lock(mutex_);
    return ended_cv_.wait_for(lock, timeout, [this] { return ended_ == int(agents_.size()); });
  }

 private:
  struct Turn {
    Clock::time_point sent;
    TurnRecord record;
    size_t prompt_tokens = 0;
    std::string text;
    std::vector<int32_t> ids;
  };

  void start_turn(Agent& agent) {
    RequestSpec spec;
    spec.request.sampling.max_tokens = options_.max_tokens;
    spec.request.sampling.temperature = float(options_.temperature);
    spec.request.sampling.seed = uint64_t(1000 * agent.index() + agent.turns_done());
    spec.request.sampling.has_seed = true;
    if (planner_) {
      // The server's chat request, done here: the template's prompt with the
      // tools, the grammar of the call asked for. The call ends at EOS.
      auto& tool_agent = static_cast<ToolAgent&>(agent);
      std::string error;
      auto prompt = planner_->prompt(tool_agent.messages(), error);
      auto grammar = prompt ? planner_->grammar(tool_agent.choice(), error) : std::nullopt;
      if (!grammar) return fail(agent, "turn " + std::to_string(agent.turns_done() + 1) + ": " + error);
      spec.request.prompt = std::move(*prompt);
      spec.request.sampling.grammar = std::move(*grammar);
      spec.shown_tokens = planner_->shown_tokens();
    } else {
      spec.request.prompt = static_cast<TokenAgent&>(agent).conversation();
      spec.request.sampling.ignore_eos = true;  // every turn makes max_tokens, so runs compare
    }
    if (options_.sessions) spec.request.session = "agent-" + std::to_string(agent.index());
    auto turn = std::make_shared<Turn>();
    turn->sent = Clock::now();
    turn->prompt_tokens = spec.request.prompt.size();
    engine_.submit(std::move(spec), [this, &agent, turn](const StreamEvent& e) { on_event(agent, *turn, e); });
  }

  void on_event(Agent& agent, Turn& turn, const StreamEvent& e) {
    if (!e.token_ids.empty()) {
      if (turn.record.ttft < 0) turn.record.ttft = seconds_between(turn.sent, Clock::now());
      turn.ids.insert(turn.ids.end(), e.token_ids.begin(), e.token_ids.end());
      counters_.tokens += int64_t(e.token_ids.size());
    }
    turn.text += e.text;
    if (!e.last()) return;
    if (e.finish != FinishReason::length && e.finish != FinishReason::stop) {
      return fail(agent, std::string("turn ") + std::to_string(agent.turns_done() + 1) + " ended " +
                             to_string(e.finish) + (e.message.empty() ? "" : ": " + e.message));
    }
    agent_prompt_tokens_ += int64_t(turn.prompt_tokens);
    agent_cached_tokens_ += e.cached_prompt_tokens;
    turn.record.e2e = seconds_between(turn.sent, Clock::now());
    turn.record.tokens = int(turn.ids.size());
    if (planner_) {
      std::string content;
      const std::vector<Call> calls = planner_->calls(turn.text, content);  // the server's parser
      static_cast<ToolAgent&>(agent).finish_turn(turn.record, calls, content);
    } else {
      static_cast<TokenAgent&>(agent).finish_turn(turn.record, turn.text, turn.ids);
    }
    ++counters_.turns;
    if (!agent.done()) {
      if (options_.tool_ms <= 0) return start_turn(agent);
      return later_.post(Clock::now() + std::chrono::milliseconds(options_.tool_ms),
                         [this, &agent] { start_turn(agent); });
    }
    ++counters_.agents_done;
    agent_ended();
  }

  void fail(Agent& agent, std::string why) {
    agent.fail(std::move(why));
    ++counters_.agents_failed;
    agent_ended();
  }

  void agent_ended() {
    std::lock_guard lock(mutex_);
    ++ended_;
    if (ended_ == int(agents_.size())) background_->stop = true;
    ended_cv_.notify_all();
  }

  // Unrelated traffic (--background): each loop sends a prompt of its own
  // (300 tokens nobody else uses) and, when it ends, the next, until the
  // agents are done. Its state is shared, not this object's: a request may
  // end after the swarm is gone.
  struct Background {
    std::atomic<bool> stop{false};
    std::atomic<uint64_t> sent{0};
  };
  static void start_background(std::shared_ptr<Background> bg, Engine& engine, int loop) {
    if (bg->stop) return;
    const uint64_t n = bg->sent++;
    RequestSpec spec;
    for (int j = 0; j < 300; ++j) spec.request.prompt.push_back(3 + int32_t((n * 7919 + uint64_t(j) * 104729) % 200));
    spec.request.prompt[0] = 1;
    spec.request.sampling.max_tokens = 16;
    spec.request.sampling.temperature = 0;
    spec.request.sampling.ignore_eos = true;
    engine.submit(std::move(spec), [bg, &engine, loop](const StreamEvent& e) {
      if (e.last() && e.finish != FinishReason::error) start_background(bg, engine, loop);
    });
  }

  Engine& engine_;
  const Options& options_;
  std::vector<std::unique_ptr<Agent>>& agents_;
  Counters& counters_;
  ToolPlanner* planner_;  // null: --tool-choice off
  std::mutex mutex_;
  std::condition_variable ended_cv_;
  int ended_ = 0;  // agents finished or failed (guarded by mutex_)
  std::atomic<int64_t> agent_prompt_tokens_{0}, agent_cached_tokens_{0};
  std::shared_ptr<Background> background_ = std::make_shared<Background>();
  Later later_;    // the tool's answers, with --tool-ms
};

int run_in_process(const Options& o) {
  caf::actor_system_config cfg;
  add_engine_types(cfg);
  caf::actor_system sys{cfg};
  auto loaded = load_model(o.model);
  if (!loaded) {
    std::fprintf(stderr, "cannot load the model: %s\n", loaded.error().message.c_str());
    return 1;
  }
  const int context = loaded->config.context_length;
  const std::string model_name = loaded->source;
  const Encoder encode{loaded->tokenizer, loaded->config.vocab_size};
  std::printf("model: %s (vocabulary %d, context %d, %s)\n", loaded->source.c_str(), loaded->config.vocab_size,
              context, loaded->tokenizer ? "with a tokenizer" : "no tokenizer: prompts are bytes as token ids");

  std::vector<std::unique_ptr<Agent>> agents;
  size_t longest = 0;  // tokens of an agent's whole conversation, at most
  std::shared_ptr<const http::ChatTemplate> chat;
  if (o.tools()) {
    if (!loaded->tokenizer) {
      std::fprintf(stderr, "the model has no tokenizer, so it cannot follow a tool-call grammar: "
                           "use --tool-choice off\n");
      return 1;
    }
    auto made = http::make_chat_template("auto", loaded->chat_template, loaded->tokenizer);
    if (!made) {
      std::fprintf(stderr, "chat template: %s\n", made.error().message.c_str());
      return 1;
    }
    chat = std::move(*made);
    const PromptCounter count = [&chat](const json::array& messages, std::string& error) -> std::optional<int> {
      auto ids = render_prompt(*chat, messages, error);
      return ids ? std::optional<int>(int(ids->size())) : std::nullopt;
    };
    SharedPrompt shared;
    agents = make_tool_agents(o, count, context, shared);
    if (agents.empty()) return 1;
    longest = size_t(shared.first_tokens) + size_t(o.turns) * size_t(o.max_tokens + shared.turn_tokens);
  } else {
    if (system_token_budget(context, o.turns, o.max_tokens) < 16) {
      std::fprintf(stderr, "the model's context (%d) is too short for %d turns of %d tokens\n", context, o.turns,
                   o.max_tokens);
      return 1;
    }
    agents = make_token_agents(o, encode, context);
    longest = static_cast<const TokenAgent&>(*agents.front()).conversation().size() +
              size_t(o.turns) * size_t(o.max_tokens + kToolTokens);
  }

  EngineConfig config;
  config.prefix_wait = o.prefix_wait;
  config.session_max_share = 0.5;  // with --sessions: half the pool may hold conversations between turns
  config.max_num_seqs = std::max(config.max_num_seqs, o.agents);
  // Room for every agent's whole conversation without sharing, so the KV
  // cache never makes an agent wait, with or without prefix waits.
  config.kv_cache_tokens = o.kv_tokens > 0 ? o.kv_tokens : int64_t(o.agents) * int64_t(longest + 16);
  auto engine = Engine::create(sys, config, std::move(loaded).value());
  if (!engine) {
    std::fprintf(stderr, "cannot start the engine: %s\n", engine.error().message.c_str());
    return 1;
  }
  std::printf("engine: prefix wait %s, sessions %s, KV cache %lld tokens\n", o.prefix_wait ? "on" : "off",
              o.sessions ? "on" : "off", (long long)(*engine)->config().kv_cache_tokens);

  std::optional<ToolPlanner> planner;
  if (o.tools()) {
    // Every grammar a turn may ask for, compiled before the agents start
    // (the first builds the vocabulary's index): turns find them cached.
    planner.emplace(chat, (*engine)->grammar_binder(), *(*engine)->model().tokenizer);
    const Clock::time_point t0 = Clock::now();
    const ChoicePolicy policy = *parse_choice_policy(o.tool_choice);
    for (int agent = 0; agent < 2; ++agent) {
      for (int turn = 0; turn < 2; ++turn) {
        std::string error;
        if (!planner->grammar(choice_for(policy, agent, turn), error)) {
          std::fprintf(stderr, "the tool-call grammar: %s\n", error.c_str());
          return 1;
        }
      }
    }
    std::printf("tool calls: %s syntax (chat template %s), grammars compiled in %.0f ms\n",
                http::to_string(planner->format()), chat->description().c_str(),
                1e3 * seconds_between(t0, Clock::now()));
  }

  Counters counters;
  InProcessSwarm swarm(**engine, o, agents, counters, planner ? &*planner : nullptr);
  const Clock::time_point start = Clock::now();
  bool in_time = false;
  {
    ProgressLine progress(counters, o.agents, o.agents * o.turns);
    swarm.start();
    in_time = swarm.wait(std::chrono::seconds(o.timeout_seconds));
  }
  const double seconds = seconds_between(start, Clock::now());
  if (!in_time) {
    std::fprintf(stderr, "the agents did not finish within %d s\n", o.timeout_seconds);
    std::_Exit(1);  // requests still in flight refer to the agents
  }

  auto stats = (*engine)->stats();
  if (!stats) {
    std::fprintf(stderr, "stats: %s\n", stats.error().message.c_str());
    return 1;
  }
  const BlockStats& b = stats->blocks;
  char cache_line[512];
  std::snprintf(cache_line, sizeof cache_line,
                "prefix cache: %llu of %llu prompt tokens looked up were cached (hit rate %.1f%%), prefix waits %llu; "
                "computed tokens %llu (prompt tokens %llu, generated %llu)",
                (unsigned long long)b.prefix_hit_tokens, (unsigned long long)b.prefix_query_tokens,
                b.prefix_query_tokens ? 100.0 * double(b.prefix_hit_tokens) / double(b.prefix_query_tokens) : 0.0,
                (unsigned long long)stats->prefix_waits, (unsigned long long)stats->computed_tokens,
                (unsigned long long)stats->prompt_tokens, (unsigned long long)stats->generated_tokens);
  const int failed = print_report(agents, o.turns, seconds, cache_line);
  if (o.tools()) print_call_shares(agents, "in-process");
  std::printf("agents' turns: %lld of %lld prompt tokens found in the prefix cache (%.1f%%)%s\n",
              (long long)swarm.agent_cached_tokens(), (long long)swarm.agent_prompt_tokens(),
              swarm.agent_prompt_tokens() ? 100.0 * double(swarm.agent_cached_tokens()) / double(swarm.agent_prompt_tokens())
                                          : 0.0,
              o.background > 0 ? ", with unrelated traffic beside them" : "");
  if (!o.json_out.empty()) {
    const json::object cache{
        {"prefix_hit_rate_pct",
         b.prefix_query_tokens ? 100.0 * double(b.prefix_hit_tokens) / double(b.prefix_query_tokens) : 0.0},
        {"prefix_hit_tokens", b.prefix_hit_tokens},
        {"prefix_query_tokens", b.prefix_query_tokens},
        {"prefix_waits", stats->prefix_waits},
        {"computed_tokens", stats->computed_tokens},
        {"prompt_tokens", stats->prompt_tokens}};
    if (!write_json(o, model_name, agents, seconds, cache)) return 1;
  }
  return failed == 0 ? 0 : 1;
}

// ---- over HTTP --------------------------------------------------------------------

int run_over_http(const Options& o) {
  HttpTarget target;
  if (!target.parse_url(o.url)) {
    std::fprintf(stderr, "--url: want http://HOST:PORT, not %s\n", o.url.c_str());
    return 1;
  }
  target.model = o.model;
  target.api_key = o.api_key;
  target.timeout = std::chrono::seconds(o.timeout_seconds);
  std::string error;
  // The server's context length, to fit the conversation in it.
  const std::optional<std::string> models = http_get(target, "/v1/models", error);
  if (!models) {
    std::fprintf(stderr, "%s\n", error.c_str());
    return 1;
  }
  int context = 0;
  try {
    context = int(json::parse(*models).at("data").at(0).at("max_model_len").to_number<int64_t>());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "GET /v1/models: no data[0].max_model_len (%s): %s\n", e.what(), models->c_str());
    return 1;
  }
  std::vector<std::unique_ptr<Agent>> agents;
  const Encoder encode;  // --tool-choice off: bytes, ids below 256 exist in every vocabulary the server loads
  if (o.tools()) {
    std::printf("server: %s (context %d); chats with tools\n", o.url.c_str(), context);
    SharedPrompt shared;
    agents = make_tool_agents(o, server_prompt_counter(target), context, shared);
    if (agents.empty()) return 1;
  } else {
    std::printf("server: %s (context %d); prompts are bytes as token ids\n", o.url.c_str(), context);
    if (system_token_budget(context, o.turns, o.max_tokens) < 16) {
      std::fprintf(stderr, "the model's context (%d) is too short for %d turns of %d tokens\n", context, o.turns,
                   o.max_tokens);
      return 1;
    }
    agents = make_token_agents(o, encode, context);
  }

  const std::optional<std::string> metrics_before = http_get(target, "/metrics", error);
  if (!metrics_before) {
    std::fprintf(stderr, "%s\n", error.c_str());
    return 1;
  }

  net::io_context ioc;
  tcp::resolver::results_type endpoints;
  try {
    endpoints = tcp::resolver(ioc).resolve(target.host, target.port);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "resolve %s: %s\n", target.host.c_str(), e.what());
    return 1;
  }
  Counters counters;
  const TurnSettings settings{o.max_tokens, o.temperature, o.sessions};
  const Clock::time_point start = Clock::now();
  {
    ProgressLine progress(counters, o.agents, o.agents * o.turns);
    for (auto& agent : agents)
      std::make_shared<HttpAgent>(ioc, endpoints, target, settings, *agent, counters, [] {})->start();
    ioc.run();  // returns once every agent has finished or failed (each closes its connection)
  }
  const double seconds = seconds_between(start, Clock::now());

  const std::optional<std::string> metrics_after = http_get(target, "/metrics", error);
  if (!metrics_after) {
    std::fprintf(stderr, "%s\n", error.c_str());
    return 1;
  }
  const char* hits_name = "conveyor:prefix_cache_hits_total";
  const char* queries_name = "conveyor:prefix_cache_queries_total";
  const double hits = metric_value(*metrics_after, hits_name) - metric_value(*metrics_before, hits_name);
  const double queries = metric_value(*metrics_after, queries_name) - metric_value(*metrics_before, queries_name);
  char cache_line[512];
  std::snprintf(cache_line, sizeof cache_line,
                "prefix cache (from /metrics, this run): %.0f of %.0f prompt tokens looked up were cached "
                "(hit rate %.1f%%)",
                hits, queries, queries > 0 ? 100.0 * hits / queries : 0.0);
  const int failed = print_report(agents, o.turns, seconds, cache_line);
  if (o.tools()) print_call_shares(agents, "over HTTP");
  if (!o.json_out.empty()) {
    const json::object cache{{"prefix_hit_rate_pct", queries > 0 ? 100.0 * hits / queries : 0.0},
                             {"prefix_hit_tokens", hits},
                             {"prefix_query_tokens", queries}};
    if (!write_json(o, o.model.empty() ? o.url : o.model + " at " + o.url, agents, seconds, cache)) return 1;
  }
  return failed == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"conveyor example: an agent swarm, many multi-turn agents over one shared system prompt"};
  Options o;
  app.add_option("--mode", o.mode, "inprocess (an Engine in this program) or http (a `conveyor serve` at --url)")
      ->check(CLI::IsMember({"inprocess", "http"}));
  app.add_option("--url", o.url, "the server, for --mode http");
  app.add_option("--model", o.model,
                 "in-process: GGUF file, llama2.c checkpoint or dummy:NAME (default: the embedded tiny model); "
                 "over HTTP: the model name to ask for");
  app.add_option("--api-key", o.api_key, "over HTTP: the server's API key, if it has one");
  app.add_option("--agents", o.agents, "agents running at once")->check(CLI::Range(1, 4096));
  app.add_option("--turns", o.turns, "turns per agent")->check(CLI::Range(1, 64));
  app.add_option("--system-tokens", o.system_tokens,
                 "tokens of the shared prompt: with tools, agent 0's first prompt (system text, tools, task); "
                 "off, the system prompt (cut to fit the context with every turn)")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--tool-choice", o.tool_choice,
                 "how each turn asks for a tool call: required | named (the function, lookup and calc in turn) | "
                 "alternate (required, then named) | auto (the model may answer in text) | off (no tools: token-id "
                 "prompts, a call derived from each output; for models without a tokenizer)")
      ->check(CLI::IsMember({"required", "named", "alternate", "auto", "off"}));
  app.add_option("--max-tokens", o.max_tokens,
                 "tokens generated per turn, at most (default: 128 with tools, enough for the longest call; 16 "
                 "with --tool-choice off, each turn making all of them)")
      ->check(CLI::Range(1, 4096));
  app.add_option("--temperature", o.temperature, "sampling temperature")->check(conveyor::cli::finite_range(0, 10));
  app.add_option("--prefix-wait", o.prefix_wait,
                 "in-process: true | false, requests with the same uncached prefix wait for the first one's "
                 "prefill of it (EngineConfig::prefix_wait; over HTTP it is the server's --prefix-wait)");
  app.add_option("--sessions", o.sessions,
                 "true | false: each agent's requests name its session, so the engine keeps its conversation's "
                 "KV between turns (GenerateRequest::session / \"session_id\"; default false)");
  app.add_option("--tool-ms", o.tool_ms,
                 "in-process: milliseconds the tool takes; the agent's next turn starts that much later (default 0)")
      ->check(CLI::Range(0, 600000));
  app.add_option("--background", o.background,
                 "in-process: unrelated requests (300-token prompts of their own) kept running beside the agents, "
                 "competing for the KV cache (default 0)")
      ->check(CLI::Range(0, 1024));
  app.add_option("--kv-tokens", o.kv_tokens,
                 "in-process: KV cache tokens (default: every agent's whole conversation, unshared)")
      ->check(CLI::Range(int64_t(0), int64_t(1) << 30));
  app.add_option("--timeout", o.timeout_seconds, "seconds to wait for the swarm")->check(CLI::Range(1, 86400));
  app.add_option("--json", o.json_out,
                 "also write the figures and every turn's TTFT and end-to-end time to FILE (for "
                 "`conveyor bench --report DIR --add-figures FILE`)");
  if (auto code = conveyor::cli::parse_command_line(app, argc, argv)) return *code;
  if (o.max_tokens == 0) o.max_tokens = o.tools() ? 128 : 16;
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // whole lines, also into a pipe: the progress thread prints too

  return o.mode == "http" ? run_over_http(o) : run_in_process(o);
}
