// The server's own settings (the engine's are EngineConfig), with defaults.
// Each is a key of the [server] table of a config file (configs/serve.toml)
// and, except io_threads, idle_timeout_seconds and shutdown_grace_seconds, a
// `conveyor serve` flag.
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
  double shutdown_grace_seconds = 3.0;   // how long stop() lets sessions say goodbye
};

}  // namespace conveyor::http
