#include "http/serve_settings.hpp"

#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <sstream>
#include <toml++/toml.h>

#include "engine/kv_capacity.hpp"
#include "http/server_log.hpp"

namespace conveyor::http {
namespace {

using Setter = std::function<Status(const toml::node&, const std::string& where)>;

Status type_error(const std::string& where, const char* want) {
  return make_error(Errc::invalid_argument, where + " must be " + want);
}

template <class Int>
Setter integer(Int& out) {
  return [&out](const toml::node& n, const std::string& where) -> Status {
    const auto v = n.value<int64_t>();
    if (!n.is_integer() || !v) return type_error(where, "an integer");
    if (*v < int64_t(std::numeric_limits<Int>::min()) || uint64_t(*v) > uint64_t(std::numeric_limits<Int>::max()))
      return type_error(where, "in range");
    out = Int(*v);
    return Status::ok();
  };
}

Setter real(double& out) {
  return [&out](const toml::node& n, const std::string& where) -> Status {
    const auto v = n.value<double>();  // integers convert too
    if (!v) return type_error(where, "a number");
    out = *v;
    return Status::ok();
  };
}

Setter seconds(double& out) {
  return [&out](const toml::node& n, const std::string& where) -> Status {
    const auto v = n.value<double>();
    if (!v || !(*v >= 0)) return type_error(where, "a number of seconds, 0 or more");
    out = *v;
    return Status::ok();
  };
}

// A string that `parse` accepts (its error names the choices).
template <class Parse>
Setter choice(std::string& out, Parse parse) {
  return [&out, parse](const toml::node& n, const std::string& where) -> Status {
    if (!n.is_string()) return type_error(where, "a string");
    const std::string value = *n.value<std::string>();
    if (auto parsed = parse(value); !parsed) return make_error(Errc::invalid_argument, where + ": " + parsed.error().message);
    out = value;
    return Status::ok();
  };
}

Setter replaced_by(const char* key) {
  return [key](const toml::node&, const std::string& where) -> Status {
    return make_error(Errc::invalid_argument, where + " was replaced by " + key);
  };
}

Setter text(std::string& out) {
  return [&out](const toml::node& n, const std::string& where) -> Status {
    if (!n.is_string()) return type_error(where, "a string");
    out = *n.value<std::string>();
    return Status::ok();
  };
}

// Bytes as an integer, or a size string ("4GiB", engine/kv_capacity.hpp).
Setter byte_size(int64_t& out) {
  return [&out](const toml::node& n, const std::string& where) -> Status {
    if (n.is_integer()) return integer(out)(n, where);
    if (!n.is_string()) return type_error(where, "a size such as \"4GiB\" or a number of bytes");
    auto bytes = parse_byte_size(*n.value<std::string>());
    if (!bytes) return make_error(Errc::invalid_argument, where + ": " + bytes.error().message);
    out = *bytes;
    return Status::ok();
  };
}

Setter boolean(bool& out) {
  return [&out](const toml::node& n, const std::string& where) -> Status {
    if (!n.is_boolean()) return type_error(where, "true or false");
    out = *n.value<bool>();
    return Status::ok();
  };
}

Status apply(const toml::table& table, const std::map<std::string, Setter>& setters,
             const std::string& prefix) {
  for (const auto& [key, node] : table) {
    const std::string name(key.str());
    const std::string where = prefix + name;
    auto it = setters.find(name);
    if (it == setters.end()) return make_error(Errc::invalid_argument, "unknown key '" + where + "'");
    if (Status s = it->second(node, where); !s) return s;
  }
  return Status::ok();
}

}  // namespace

Status parse_serve_config(std::string_view toml_text, const std::string& source, ServeSettings& s) {
  toml::table root;
  try {
    root = toml::parse(toml_text, source);
  } catch (const toml::parse_error& e) {
    std::ostringstream msg;
    msg << source << ": " << e.description() << " (line " << e.source().begin.line << ")";
    return make_error(Errc::invalid_argument, msg.str());
  }
  ServerOptions& o = s.server;
  EngineConfig& e = s.engine;
  const std::map<std::string, Setter> server{
      {"host", text(o.host)},
      {"port", integer(o.port)},
      {"api_key", text(o.api_key)},
      {"api_key_file", text(o.api_key_file)},
      {"served_model_name", text(o.served_model_name)},
      {"chat_template", text(o.chat_template)},
      {"max_body_bytes", integer(o.max_body_bytes)},
      {"max_output_bytes", integer(o.max_output_bytes)},
      {"io_threads", integer(o.io_threads)},
      {"header_timeout", real(o.header_timeout_seconds)},
      {"idle_timeout_seconds", real(o.idle_timeout_seconds)},
      {"max_connections", integer(o.max_connections)},
      {"ws_max_messages_per_second", integer(o.ws_max_messages_per_second)},
      {"shutdown_timeout", seconds(o.shutdown_timeout_seconds)},
      {"shutdown_grace_seconds", replaced_by("server.shutdown_timeout")},
      {"log_level", choice(o.log_level, parse_log_level)},
      {"log_format", choice(o.log_format, parse_log_format)},
      {"log_stats_interval", seconds(o.log_stats_interval_seconds)},
  };
  const std::map<std::string, Setter> engine{
      {"device", text(e.device)},
      {"block_size", integer(e.block_size)},
      {"kv_cache_tokens", integer(e.kv_cache_tokens)},
      {"kv_cache_memory", byte_size(e.kv_cache_memory)},
      {"kv_cache_memory_fraction", real(e.kv_cache_memory_fraction)},
      {"gpu_memory_utilization", real(e.gpu_memory_utilization)},
      {"kv_cache_dtype", text(e.kv_cache_dtype)},
      {"swap_space_tokens", integer(e.swap_space_tokens)},
      {"max_num_seqs", integer(e.max_num_seqs)},
      {"max_batched_tokens", integer(e.max_batched_tokens)},
      {"prefill_chunk", integer(e.prefill_chunk)},
      {"max_waiting", integer(e.max_waiting)},
      {"preemption", text(e.preemption)},
      {"admission", text(e.admission)},
      {"batching", text(e.batching)},
      {"prefix_caching", boolean(e.prefix_caching)},
      {"prefix_wait", boolean(e.prefix_wait)},
      {"session_ttl_seconds", real(e.session_ttl_seconds)},
      {"session_max_share", real(e.session_max_share)},
      {"overlap", boolean(e.overlap)},
      {"aging_interval_seconds", real(e.aging_interval_seconds)},
      {"threads", integer(e.threads)},
      {"fault_recovery", text(e.fault_recovery)},
      {"max_fault_retries", integer(e.max_fault_retries)},
  };
  std::map<std::string, Setter> top{{"model", text(s.model)}, {"tokenizer", text(s.tokenizer)}};
  for (const auto& [name, table] : {std::pair{"server", &server}, std::pair{"engine", &engine}}) {
    top[name] = [table = table, name = std::string(name)](const toml::node& n, const std::string& where) -> Status {
      if (!n.is_table()) return type_error(where, "a table");
      return apply(*n.as_table(), *table, name + ".");
    };
  }
  if (Status st = apply(root, top, ""); !st)
    return make_error(Errc::invalid_argument, source + ": " + st.error().message);
  if (Status st = validate_server_options(o); !st)
    return make_error(Errc::invalid_argument, source + ": " + st.error().message);
  return Status::ok();
}

Status validate_server_options(const ServerOptions& o) {
  auto positive = [](double v) { return v > 0 && v <= 1e9; };  // also refuses NaN
  if (!positive(o.header_timeout_seconds))
    return make_error(Errc::invalid_argument, "--header-timeout (header_timeout) must be more than 0 seconds");
  if (!positive(o.idle_timeout_seconds))
    return make_error(Errc::invalid_argument, "--idle-timeout (idle_timeout_seconds) must be more than 0 seconds");
  if (o.io_threads < 1) return make_error(Errc::invalid_argument, "io_threads must be 1 or more");
  if (o.ws_max_messages_per_second < 0)
    return make_error(Errc::invalid_argument,
                      "--ws-max-messages-per-second (ws_max_messages_per_second) must be 0 (no limit) or more");
  return Status::ok();
}

Status load_serve_config(const std::string& path, ServeSettings& settings) {
  std::ifstream in(path);
  if (!in) return make_error(Errc::io_error, "--config: cannot open '" + path + "'");
  std::stringstream text;
  text << in.rdbuf();
  return parse_serve_config(text.str(), path, settings);
}

}  // namespace conveyor::http
