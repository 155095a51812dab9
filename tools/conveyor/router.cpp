// `conveyor router`: one OpenAI HTTP/SSE and WebSocket endpoint in front of
// engine nodes (`conveyor serve --node-port`) on other processes or
// machines, reached through CAF's network layer (router/router_actor.hpp).
//
// The router serves the same API as `serve`, through the same server
// (http/server.hpp) over an Engine whose scheduler is the router actor
// (Engine::over): it tokenizes, renders chat templates, detokenizes and
// applies stop strings itself, so it reads the model file too (for the
// tokenizer and the chat template; the weights are loaded and freed), and
// nodes serving another model are refused.
//
// Clients' API keys and their limits (--api-key, --api-key-file) are checked
// here, in front of the nodes, as `serve` checks them.
//
// Nodes come from --nodes and --nodes-file; SIGHUP reads the file again
// (nodes added get work, nodes removed finish theirs and get no more) and,
// when the file names one, the placement policy, and reads --api-key-file
// again. SIGTERM or SIGINT drains the HTTP side as `serve` does.
#include <csignal>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>

#include "actors/engine.hpp"
#include "http/api_key_file.hpp"
#include "http/engine_port.hpp"
#include "http/server.hpp"
#include "http/server_log.hpp"
#include "base/cli_checks.hpp"
#include "model/formats/loader.hpp"
#include "http/serve_settings.hpp"
#include "router/placement.hpp"
#include "router/router_actor.hpp"
#include "tools/conveyor/cluster.hpp"
#include "tools/conveyor/commands.hpp"
#include "tools/conveyor/setting_flags.hpp"
#include "tools/conveyor/stop_signals.hpp"

namespace conveyor::cli {
namespace {

// The router's own flags; the server's (--host, --port, the keys, the log,
// ...) are http/serve_settings.hpp's, as `serve` has them.
struct RouterFlags {
  std::unique_ptr<SettingFlags> settings;
  std::string nodes, nodes_file, policy = "prefix_affinity";
  int32_t block_size = 0;
  double node_timeout = 10.0;
  ClusterTls tls;
};

int fail(int code, const std::string& message) {
  http::log_always(http::LogLevel::error, message);
  return code;
}

// --nodes, then the file's nodes not among them.
std::vector<std::string> merge_nodes(std::vector<std::string> nodes, const std::vector<std::string>& from_file) {
  for (const std::string& n : from_file)
    if (std::find(nodes.begin(), nodes.end(), n) == nodes.end()) nodes.push_back(n);
  return nodes;
}

// The file's node list and, from a line `policy = NAME`, its policy ("" when none).
Expected<std::pair<std::vector<std::string>, std::string>> read_nodes_file(const std::string& path) {
  std::ifstream in(path);
  std::error_code ec;
  if (!in || !std::filesystem::is_regular_file(path, ec))
    return make_error(Errc::io_error, "--nodes-file: cannot read '" + path + "' (not a readable file)");
  std::string line, nodes, policy;
  while (std::getline(in, line)) {
    const size_t eq = line.find('=');
    if (line.rfind("policy", 0) == 0 && eq != std::string::npos) {
      policy = line.substr(eq + 1);
      std::erase_if(policy, [](char c) { return c == ' ' || c == '\t' || c == '"' || c == '\r'; });
      continue;
    }
    nodes += line + "\n";
  }
  auto list = parse_node_list(nodes);
  if (!list) return make_error(Errc::invalid_argument, "--nodes-file: " + list.error().message);
  return std::pair{std::move(list).value(), policy};
}

// The nodes and the policy --nodes, --nodes-file and --policy give, each
// checked: what the router starts with, and what a SIGHUP would change to
// (a file the start would refuse changes nothing).
struct NodeSetup {
  std::vector<std::string> nodes;
  std::string policy;
};

Expected<NodeSetup> read_node_setup(const RouterFlags& f) {
  NodeSetup setup;
  setup.policy = f.policy;
  auto nodes = parse_node_list(f.nodes);
  if (!nodes) return make_error(Errc::invalid_argument, "--nodes: " + nodes.error().message);
  setup.nodes = std::move(nodes).value();
  if (!f.nodes_file.empty()) {
    auto file = read_nodes_file(f.nodes_file);
    if (!file) return file.error();
    setup.nodes = merge_nodes(std::move(setup.nodes), file->first);
    if (!file->second.empty()) setup.policy = file->second;
  }
  if (setup.nodes.empty()) return make_error(Errc::invalid_argument, "no nodes: give --nodes host:port,... or --nodes-file");
  if (auto p = make_placement_policy(setup.policy); !p)
    return make_error(Errc::invalid_argument,
                      (f.nodes_file.empty() ? "--policy: " : "--policy or --nodes-file: ") + p.error().message);
  return setup;
}

// Whether the router has one of `nodes` up now.
bool any_up_among(const RouterMetrics& metrics, const std::vector<std::string>& nodes) {
  std::lock_guard lock(metrics.mutex);
  for (const RouterMetrics::Node& n : metrics.nodes)
    if (n.state == "up" && std::find(nodes.begin(), nodes.end(), n.address) != nodes.end()) return true;
  return false;
}

int run_router(const RouterFlags& f) {
  http::ServeSettings settings;
  if (Status st = f.settings->apply(settings); !st) return fail(kExitUsage, st.error().message);
  const http::ServerOptions& server_options = settings.server;
  http::configure_log(server_options.log_level, server_options.log_format);
  if (Status st = check_tls(f.tls); !st) return fail(kExitUsage, st.error().message);

  RouterOptions options;
  options.policy = f.policy;
  options.block_size = f.block_size;
  options.tls = f.tls.enabled();
  options.node_timeout_seconds = f.node_timeout;
  options.on_node_change = [](const std::string& message, bool warning) {
    warning ? http::log_warn(message) : http::log_info(message);
  };
  auto setup = read_node_setup(f);
  if (!setup) return fail(kExitUsage, setup.error().message);
  options.nodes = setup->nodes;
  options.policy = setup->policy;

  if (Status st = http::validate_server_options(server_options); !st) return fail(kExitUsage, st.error().message);
  // Before the model loads, so that a bad key file does not wait for it.
  if (const auto keys = http::api_keys_of(server_options); !keys)
    return fail(kExitUsage, "--api-key-file: " + keys.error().message);

  if (Status st = stop_signals::install(); !st) return fail(kExitFailure, st.error().message);

  LoadOptions load;
  load.tokenizer_path = settings.tokenizer;
  auto loaded = load_model(settings.model, load);
  if (!loaded) return fail(kExitUsage, loaded.error().message);
  const ModelConfig mc = loaded->config;
  ModelInfo info{loaded->config, loaded->eos_ids, loaded->tokenizer, weights_fingerprint(loaded->weights)};
  const std::string gguf_template = loaded->chat_template;
  loaded = make_error(Errc::invalid_argument, "");  // the weights go

  caf::actor_system_config cfg;
  add_engine_types(cfg);
  cfg.add_message_types<caf::id_block::conveyor_router>();
  configure_cluster(cfg, f.tls);
  caf::actor_system sys{cfg};
  auto metrics = std::make_shared<RouterMetrics>();
  auto router = spawn_router(sys, options, info, metrics);
  if (!router) return fail(kExitUsage, router.error().message);
  EngineConfig ec;
  if (f.block_size > 0) ec.block_size = f.block_size;
  auto engine = Engine::over(sys, ec, info, caf::actor_cast<scheduler_actor>(*router), 0);
  http::EnginePort port(*engine);
  port.set_extra_metrics([metrics] { return metrics->render(); });
  port.set_ready([metrics] { return metrics->any_node_up(); });

  std::string served = server_options.served_model_name;
  if (served.empty()) served = settings.model.empty() ? mc.name : settings.model;
  auto context = http::make_model_context(mc, port.tokenizer(), served, server_options.chat_template, gguf_template,
                                          server_options.tool_call_parser);
  if (!context) return fail(kExitUsage, context.error().message);
  if (context->tokenizer) context->constraints = std::make_shared<http::ConstraintCompiler>(port.grammar_binder());
  http::Server server(port, server_options, std::move(context).value());
  auto bound = server.start();
  if (!bound) return fail(kExitFailure, bound.error().message);
  std::string list;
  for (const std::string& n : options.nodes) list += (list.empty() ? "" : ", ") + n;
  http::log_info("router for '" + served + "' over " + std::to_string(options.nodes.size()) + " nodes (" + list +
                 "), placement " + options.policy + (options.tls ? ", TLS" : ""));
  http::log_info("listening on http://" + server_options.host + ":" + std::to_string(*bound));

  stop_signals::unblock();
  std::string policy = options.policy;  // the placement policy in use
  for (bool draining = false;;) {
    const char byte = stop_signals::wait();
    if (byte == stop_signals::kDrained) break;
    if (byte == SIGHUP) {
      if (!server_options.api_key_file.empty()) (void)server.reload_api_keys();  // it logs what happened
      if (f.nodes_file.empty()) {
        if (server_options.api_key_file.empty()) http::log_info("SIGHUP: no --nodes-file or --api-key-file to read; nothing changes");
        continue;
      }
      auto next = read_node_setup(f);
      if (!next) {
        http::log_warn("SIGHUP: " + next.error().message + "; the nodes and the policy stay as they were");
        continue;
      }
      caf::anon_send(*router, nodes_atom_v, next->nodes);
      if (next->policy != policy) caf::anon_send(*router, policy_atom_v, next->policy);  // a new one starts afresh
      policy = next->policy;
      http::log_info("SIGHUP: " + std::to_string(next->nodes.size()) + " nodes, placement " + next->policy);
      if (!any_up_among(*metrics, next->nodes) && metrics->any_node_up())
        http::log_warn("SIGHUP: no node that is up now is in the new list; requests get 503 until one of the "
                       "listed nodes is reached");
      continue;
    }
    if (!draining) {
      draining = true;
      http::log_info(std::string(byte == SIGINT ? "SIGINT" : "SIGTERM") + ": draining, then shutting down");
      server.drain([] { stop_signals::post(stop_signals::kDrained); });
    } else if (byte == SIGINT) {
      http::log_warn("second SIGINT: exiting at once");
      std::_Exit(128 + SIGINT);
    }
  }
  http::log_info("shutting down");
  server.stop();
  return 0;
}

}  // namespace

void add_router_command(CLI::App& app, int& exit_code) {
  auto f = std::make_shared<RouterFlags>();
  CLI::App* cmd = app.add_subcommand("router", "Serve one OpenAI endpoint over several engine nodes (serve --node-port)");
  f->settings = std::make_unique<SettingFlags>(cmd, SettingFlags::Which::router);
  cmd->add_option("--nodes", f->nodes, "host:port,...: the nodes' --node-port addresses");
  cmd->add_option("--nodes-file", f->nodes_file,
                  "file of node addresses (one per line, # comments) and optionally `policy = NAME`; read "
                  "again on SIGHUP");
  cmd->add_option("--policy", f->policy, "round_robin | least_loaded | prefix_affinity (default prefix_affinity)");
  cmd->add_option("--node-timeout", f->node_timeout,
                  "seconds an up node may answer nothing before it is taken for dead and its requests move "
                  "(default 10)")
      ->check(finite_range(1e-3, 1e9));
  cmd->add_option("--block-size", f->block_size, "tokens per block of the prefix chains (default: the nodes')")
      ->check(power_of_two(1024));
  add_tls_options(cmd, f->tls);
  cmd->callback([f, &exit_code] { exit_code = run_router(*f); });
}

}  // namespace conveyor::cli
