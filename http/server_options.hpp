// The server's own settings (the engine's are EngineConfig), with defaults.
// http/serve_settings.hpp's table says which flag and which key of the
// [server] table of a config file (configs/serve.toml) sets each.
// validate_server_options() checks them; Server::start() refuses what it refuses.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/embedder.hpp"
#include "http/server_log.hpp"
#include "http/tool_call_format.hpp"

namespace conveyor::http {

// A limit given in seconds (the options' timeouts) as a duration.
inline std::chrono::milliseconds millis(double seconds) {
  return std::chrono::milliseconds(int64_t(seconds * 1000.0));
}

struct ServerOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 8000;                  // 0: any free port (tests)
  std::string api_key;                   // "": no authentication; else /v1/* needs "Authorization: Bearer KEY"
  // Several keys with per-key limits (http/api_key_file.hpp, http/key_gate.hpp),
  // read at start and again on Server::reload_api_keys() (SIGHUP); with
  // api_key too, that key is one more, without limits. Key api_key_file,
  // flag --api-key-file.
  std::string api_key_file;
  // Origins of web pages, besides the server's own (the playground), that
  // may open /v1/ws ("*": any; http/origin_policy.hpp). Key
  // allowed_origins, flag --allowed-origins, a comma-separated list.
  std::vector<std::string> allowed_origins;
  std::string served_model_name;         // the `model` clients name; "": the --model value or the model's name
  std::string chat_template = "auto";    // auto | plain | llama2 | chatml
  // How the model writes tool calls (http/tool_call_format.hpp); auto: the
  // syntax its chat template shows. Key tool_call_parser, flag --tool-call-parser.
  ToolCallParser tool_call_parser = ToolCallParser::automatic;
  // How /v1/embeddings pools an input's final hidden states (engine/embedder.hpp).
  // Key pooling, flag --pooling. llama.cpp's own default for a Llama GGUF
  // that names no pooling is none (a vector per token, which its
  // /v1/embeddings refuses); last is what decoder embedding models use.
  Pooling pooling = Pooling::last;
  // A larger request body gets 413; a larger WebSocket message closes its
  // socket with code 1009 (message too big), cancelling its requests.
  size_t max_body_bytes = 1 << 20;
  // Output a connection may have queued but not yet sent. Past it the request
  // that produced it is cancelled: an SSE connection is closed; on a WebSocket
  // the request ends `cancelled` (and the socket is closed past twice the
  // bound plus 64 KiB).
  size_t max_output_bytes = 1 << 20;
  int io_threads = 1;                    // Asio threads (one is plenty on small machines)
  // A connection that sends no complete request header this long after it
  // opened (or after the first byte of a later request) is closed: a client
  // that trickles bytes (slowloris) cannot hold it. Key header_timeout, flag
  // --header-timeout; more than 0.
  double header_timeout_seconds = 10.0;
  // A keep-alive connection with no new request this long is closed; so is
  // one whose request body or whose reading of our output stalls this long.
  // Key idle_timeout_seconds, flag --idle-timeout; more than 0.
  double idle_timeout_seconds = 60.0;
  // Open connections (HTTP and WebSocket). Past it a new connection is
  // answered 503 with Retry-After and closed; the open ones are not touched.
  // 0: no cap. Key max_connections, flag --max-connections.
  size_t max_connections = 1024;
  // Messages a WebSocket client may send per second (a burst of as many is
  // allowed). Past it the socket gets an error event (code
  // "ws_rate_limit_exceeded") and is closed (1008), cancelling its requests.
  // 0: no limit. Key ws_max_messages_per_second, flag --ws-max-messages-per-second.
  int32_t ws_max_messages_per_second = 100;
  // Stored responses of the Responses API (http/response_store.hpp): each is
  // kept this many seconds (key responses_ttl, flag --responses-ttl), at
  // most this many (responses_max, --responses-max) holding at most this
  // many bytes (responses_max_bytes, --responses-max-bytes); past a bound
  // the oldest go. Scoped to the API key that created them.
  double responses_ttl_seconds = 3600.0;
  size_t responses_max = 1000;
  size_t responses_max_bytes = size_t(64) << 20;
  // Compiled grammars (structured outputs, tool calls) kept for reuse hold
  // at most this many bytes of token masks (http/constraint_compiler.hpp;
  // the Server sets it on its ModelContext's compiler; key
  // grammar_cache_max_bytes, flag --grammar-cache-max-bytes).
  size_t grammar_cache_max_bytes = size_t(512) << 20;
  // Server::drain(): how long requests already running may take to finish
  // before they are cancelled (key shutdown_timeout, flag --shutdown-timeout).
  double shutdown_timeout_seconds = 30.0;
  // The engine summary line (running, waiting, KV usage, tokens/s) every
  // this many seconds; 0: none (key log_stats_interval).
  double log_stats_interval_seconds = 10.0;
  // The process's log (http/server_log.hpp), which `conveyor serve` sets up:
  // trace | debug | info | warn | error | off, and text | json.
  LogLevel log_level = LogLevel::info;
  LogFormat log_format = LogFormat::text;
};

}  // namespace conveyor::http
