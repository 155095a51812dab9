// `conveyor serve`: the OpenAI-compatible HTTP/SSE and WebSocket server in
// front of one engine (http/server.hpp).
//
// Settings come from defaults, then --config FILE (TOML, see
// configs/serve.toml), then the flags given on the command line. What it
// says goes through the server log (http/server_log.hpp): start-up lines,
// one line per request, the engine's summary; failures go to stderr whatever
// the level.
//
// SIGTERM, or a first SIGINT, drains the server (http/server.hpp): new
// requests get 503, running ones finish within --shutdown-timeout and are
// cancelled past it; then the server, the engine and the actor system shut
// down and it exits 0. A second SIGINT exits at once (status 130). SIGHUP
// reads --api-key-file again (http/server.hpp: a bad file keeps the old keys,
// with a warning).
//
// With --node-port the engine is also an engine node for `conveyor router`
// (actors/node.hpp, published on CAF's middleman; --no-http: the node only).
// A drain then also makes the node refuse new requests and waits, within
// --shutdown-timeout, for the requests routers sent it; past the timeout the
// process exits and the routers resubmit what still ran elsewhere.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <memory>
#include <optional>
#include <sstream>
#include <thread>

#include "actors/engine.hpp"
#include "actors/node.hpp"
#include "http/api_key_file.hpp"
#include "http/engine_port.hpp"
#include "http/serve_settings.hpp"
#include "http/server.hpp"
#include "http/server_log.hpp"
#include "model/formats/loader.hpp"
#include "tools/conveyor/cluster.hpp"
#include "tools/conveyor/commands.hpp"
#include "tools/conveyor/setting_flags.hpp"
#include "tools/conveyor/stop_signals.hpp"

namespace conveyor::cli {
namespace {

// Flags as given. The settings' flags (http/serve_settings.hpp's table)
// override the config file's values, or the defaults.
struct ServeFlags {
  std::optional<std::string> config;
  std::unique_ptr<SettingFlags> settings;
  bool debug_fault_injection = false;
  // An engine node for routers (actors/node.hpp); 0: none.
  uint16_t node_port = 0;
  std::string node_host = "127.0.0.1", node_name;
  bool no_http = false;
  ClusterTls tls;
};

// In the log's format, whatever its level.
int fail(int code, const std::string& message) {
  http::log_always(http::LogLevel::error, message);
  return code;
}

std::string format_seconds(double seconds) {
  std::ostringstream s;
  s << seconds << " s";
  return s.str();
}

int run_serve(const ServeFlags& f) {
  http::ServeSettings s;
  if (f.config) {
    if (Status st = http::load_serve_config(*f.config, s); !st) return fail(kExitUsage, st.error().message);
  }
  // One capacity flag replaces whichever of the two the config file gave.
  const bool tokens_flag = f.settings->given("kv-cache-tokens"), memory_flag = f.settings->given("kv-cache-memory");
  if (tokens_flag && memory_flag)
    return fail(kExitUsage, "--kv-cache-memory: give --kv-cache-tokens or --kv-cache-memory, not both");
  if (Status st = f.settings->apply(s); !st) return fail(kExitUsage, st.error().message);
  EngineConfig& e = s.engine;
  if (tokens_flag) e.kv_cache_memory = 0;
  if (memory_flag) {
    if (e.kv_cache_memory <= 0) return fail(kExitUsage, "--kv-cache-memory: must be more than 0 bytes");
    e.kv_cache_tokens = 0;
  }
  http::configure_log(s.server.log_level, s.server.log_format);
  if (Status st = http::validate_server_options(s.server); !st) return fail(kExitUsage, st.error().message);
  // Before the model loads, so that a bad key file does not wait for the weights.
  const auto api_keys = http::api_keys_of(s.server);
  if (!api_keys) return fail(kExitUsage, "--api-key-file: " + api_keys.error().message);
  // Faults for tests of recovery, from the environment, and only when asked.
  if (const char* faults = std::getenv("CONVEYOR_FAULTS"); faults != nullptr && f.debug_fault_injection)
    e.fault_injection = faults;
  if (Status st = validate(e); !st) return fail(kExitUsage, st.error().message);
  if (Status st = check_tls(f.tls); !st) return fail(kExitUsage, st.error().message);
  if (f.no_http && f.node_port == 0) return fail(kExitUsage, "--no-http: only with --node-port (else nothing would serve)");
  if (f.tls.enabled() && f.node_port == 0) return fail(kExitUsage, "--tls-cert: only with --node-port");
  if (s.server.chat_template != "auto") {
    if (auto kind = http::parse_chat_template_kind(s.server.chat_template); !kind)
      return fail(kExitUsage, "--chat-template: " + kind.error().message);
  }

  // A handler rather than a blocked mask and sigwait: threads that exist
  // before main (a BLAS pool) would not have the mask (stop_signals.hpp).
  if (Status st = stop_signals::install(); !st) return fail(kExitFailure, st.error().message);

  LoadOptions load;
  load.tokenizer_path = s.tokenizer;
  auto loaded = load_model(s.model, load);
  if (!loaded) {
    return fail(load_error_exit_code(loaded.error()), loaded.error().message);
  }
  LoadedModel model = std::move(loaded).value();
  const ModelConfig mc = model.config;
  const std::string gguf_template = model.chat_template;
  const std::string source = model.source;

  caf::actor_system_config cfg;
  add_engine_types(cfg);
  if (f.node_port != 0) configure_cluster(cfg, f.tls);
  caf::actor_system sys{cfg};
  auto engine = Engine::create(sys, e, std::move(model));
  if (!engine) return fail(kExitUsage, engine.error().message);
  http::EnginePort port(**engine);
  (*engine)->on_restart([](const std::string& fault) {
    http::log_warn("engine restarted after a fault (" + fault + "); running requests are " +
                   "recomputed or ended, see --fault-recovery");
  });
  if (!e.fault_injection.empty()) http::log_warn("fault injection on: CONVEYOR_FAULTS=" + e.fault_injection);

  std::string served = s.server.served_model_name;
  if (served.empty()) served = s.model.empty() ? mc.name : s.model;
  auto context = http::make_model_context(mc, port.tokenizer(), served, s.server.chat_template, gguf_template,
                                          s.server.tool_call_parser);
  if (!context) return fail(kExitUsage, context.error().message);
  if (context->tokenizer) context->constraints = std::make_shared<http::ConstraintCompiler>(port.grammar_binder());
  context->fcfs_only = (*engine)->config().scheduling_policy != SchedulingPolicy::priority;
  context->max_samples = std::min((*engine)->config().max_num_seqs, kMaxSamples);
  const std::string template_name = context->chat ? context->chat->description() : "none (no tokenizer)";

  const int32_t blocks = (*engine)->num_blocks();
  const EngineConfig& resolved = (*engine)->config();
  const KvCapacity& kv = (*engine)->kv_capacity();
  const int64_t token_bytes = kv.tokens > 0 ? kv.bytes / kv.tokens : 0;
  std::ostringstream line;
  line << "model " << source << " served as '" << served << "'";
  http::log_info(line.str());
  line.str("");
  line << mc.architecture << ", dim " << mc.dim << ", hidden " << mc.hidden_dim << ", " << mc.n_layers << " layers, "
       << mc.n_heads << " heads (" << mc.n_kv_heads << " KV), vocab " << mc.vocab_size << ", context "
       << mc.context_length << ", " << mc.parameter_count() << " parameters";
  http::log_info(line.str());
  http::log_info("weights " + (*engine)->weights_description());
  const SpeculativeConfig& spec = resolved.speculative;
  line.str("");
  line << "speculative decoding ";
  if (spec.method == SpeculativeMethod::none) line << "none";
  else if (spec.num_tokens == 0) line << to_string(spec.method) << " off (--speculative-tokens 0)";
  else
    line << to_string(spec.method) << (spec.draft_model.empty() ? "" : " " + spec.draft_model) << ", up to "
         << spec.num_tokens << " drafts a step while at most " << spec.disable_batch << " sequences decode";
  line << "; jump-forward under grammars " << (spec.jump_forward && spec.num_tokens > 0 ? "on" : "off");
  http::log_info(line.str());
  line.str("");
  line << "KV cache " << kv.tokens << " tokens in " << blocks << " blocks of " << e.block_size << ", "
       << to_string(resolved.kv_cache_dtype) << ", " << format_bytes(kv.bytes) << " (" << kv.origin << "); swap "
       << e.swap_space_tokens << " tokens ("
       << format_bytes(e.swap_space_tokens / e.block_size * e.block_size * token_bytes) << "); chat template "
       << template_name << ", tool calls " << http::to_string(context->tool_calls.format)
       << (context->tool_calls.named_calls ? " ([TOOL_CALLS]f[ARGS]{...})" : "");
  http::log_info(line.str());

  std::optional<http::Server> server;
  if (!f.no_http) {
    server.emplace(port, s.server, std::move(context).value());
    auto bound = server->start();
    if (!bound) return fail(kExitFailure, bound.error().message);
    http::log_info("listening on http://" + s.server.host + ":" + std::to_string(*bound) +
                   (api_keys->empty() ? "" : " (API key required: " + std::to_string(api_keys->size()) + " keys)"));
  }
  // The node last: once published, it lives until it is told to stop, so
  // a failure after it would leave the process serving routers nothing.
  node_actor node;
  if (f.node_port != 0) {
    node = spawn_node(sys, **engine, f.node_name, served);
    auto published = publish_node(node, f.node_host, f.node_port, f.tls.enabled());
    if (!published) {
      caf::anon_send_exit(node, caf::exit_reason::user_shutdown);
      return fail(kExitFailure, published.error().message);
    }
    const std::string address = f.node_host + ":" + std::to_string(*published);
    http::log_info("engine node" + (f.node_name.empty() ? "" : " '" + f.node_name + "'") + " on " + address +
                   (f.tls.enabled() ? " (TLS, peers authenticated)" : " (no TLS: a private network only)"));
  }
  // After a drain's HTTP part: the node's requests finish too (or the
  // timeout passes), then the main thread hears kDrained.
  std::atomic<bool> http_drained{!server};
  std::thread drain_waiter;
  auto start_drain_waiter = [&] {
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::duration<double>(s.server.shutdown_timeout_seconds);
    drain_waiter = std::thread([&http_drained, &engine, deadline, has_node = bool(node)] {
      while (!http_drained.load()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
      while (has_node && std::chrono::steady_clock::now() < deadline) {
        auto stats = (*engine)->stats();
        if (!stats || stats->num_running + stats->num_waiting == 0) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
      stop_signals::post(stop_signals::kDrained);
    });
  };

  stop_signals::unblock();
  for (bool draining = false;;) {
    const char byte = stop_signals::wait();
    if (byte == stop_signals::kDrained) break;
    if (byte == SIGHUP) {
      if (s.server.api_key_file.empty())
        http::log_info("SIGHUP: no --api-key-file to reload; nothing changes");
      else if (server)
        (void)server->reload_api_keys();  // it logs what happened
      continue;
    }
    const char* name = byte == SIGINT ? "SIGINT" : "SIGTERM";
    if (!draining) {
      draining = true;
      http::log_info(std::string(name) + ": draining, then shutting down (--shutdown-timeout " +
                     format_seconds(s.server.shutdown_timeout_seconds) + "; a second SIGINT exits at once)");
      if (node) caf::anon_send(node, drain_atom_v);  // routers place new requests elsewhere
      if (server) server->drain([&http_drained] { http_drained = true; });
      start_drain_waiter();
    } else if (byte == SIGINT) {
      // The operator insists: no goodbyes. Every line so far is flushed (the
      // log writes each one through).
      http::log_warn("second SIGINT: exiting at once");
      std::_Exit(128 + SIGINT);
    } else {
      http::log_info("SIGTERM: already draining");
    }
  }
  http::log_info("shutting down");
  if (drain_waiter.joinable()) drain_waiter.join();
  if (server) server->stop();
  if (node) caf::anon_send_exit(node, caf::exit_reason::user_shutdown);
  return 0;  // the server, the port, the engine, then the actor system go, in that order
}

}  // namespace

void add_serve_command(CLI::App& app, int& exit_code) {
  auto f = std::make_shared<ServeFlags>();
  CLI::App* cmd = app.add_subcommand("serve", "Serve the model over HTTP (OpenAI API, SSE) and WebSocket");
  cmd->add_option("--config", f->config, "TOML settings file (flags override it; see configs/serve.toml)");
  f->settings = std::make_unique<SettingFlags>(cmd, SettingFlags::Which::serve);
  cmd->add_flag("--debug-fault-injection", f->debug_fault_injection,
                "inject the faults the CONVEYOR_FAULTS environment variable names (executor=N, swap=N, "
                "alloc=N, N+ for every one from N; tests only)");
  cmd->add_option("--node-port", f->node_port,
                  "also serve as an engine node for `conveyor router` on this port (CAF's network layer; "
                  "default 0: not a node)");
  cmd->add_option("--node-host", f->node_host,
                  "address the node port binds (default 127.0.0.1: bind a private network's address only, "
                  "or use --tls-*)");
  cmd->add_option("--node-name", f->node_name, "the node's name in a router's metrics (default: the address the router uses)");
  cmd->add_flag("--no-http", f->no_http, "with --node-port: no HTTP listener, the node only");
  add_tls_options(cmd, f->tls);
  cmd->callback([f, &exit_code] { exit_code = run_serve(*f); });
}

}  // namespace conveyor::cli
