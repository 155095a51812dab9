// The server's own settings (the engine's are EngineConfig), with defaults.
// Each is a key of the [server] table of a config file (configs/serve.toml)
// and, except io_threads and idle_timeout_seconds, a `conveyor serve` flag.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace conveyor::http {

struct ServerOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 8000;                  // 0: any free port (tests)
  std::string api_key;                   // "": no authentication; else /v1/* needs "Authorization: Bearer KEY"
  std::string served_model_name;         // the `model` clients name; "": the --model value or the model's name
  std::string chat_template = "auto";    // auto | plain | llama2 | chatml
  size_t max_body_bytes = 1 << 20;       // larger request bodies (and WebSocket messages) get 413
  // Output a connection may have queued but not yet sent. Past it the request
  // that produced it is cancelled: an SSE connection is closed; on a WebSocket
  // the request ends `cancelled` (and the socket is closed past twice the
  // bound plus 64 KiB).
  size_t max_output_bytes = 1 << 20;
  int io_threads = 1;                    // Asio threads (one is plenty on small machines)
  double idle_timeout_seconds = 60.0;    // keep-alive without a request; a stalled write
  // Server::drain(): how long requests already running may take to finish
  // before they are cancelled (key shutdown_timeout, flag --shutdown-timeout).
  double shutdown_timeout_seconds = 30.0;
  // The engine summary line (running, waiting, KV usage, tokens/s) every
  // this many seconds; 0: none (key log_stats_interval).
  double log_stats_interval_seconds = 10.0;
  // The process's log (http/server_log.hpp), which `conveyor serve` sets up:
  // trace | debug | info | warn | error | off, and text | json.
  std::string log_level = "info";
  std::string log_format = "text";
};

}  // namespace conveyor::http
