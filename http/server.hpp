// The HTTP/WebSocket server: a listener, Asio threads, and the shared state
// of its sessions, in front of one engine (through an EnginePort).
//
//   http::Server server(port, options, std::move(model_context));
//   auto bound = server.start();     // the port (options.port 0: any free one)
//   ...
//   server.drain([] { /* tell the main thread */ });   // optional: a graceful end
//   server.stop();                   // also done by the destructor
//
// drain(): from now on every new request is answered 503 with Retry-After
// (GET /health too, with {"status": "draining"}; GET /metrics still works;
// a new WebSocket request gets an error event), while the requests already
// running go on. When none is left, `drained` is called. Requests still
// running after options.shutdown_timeout_seconds are cancelled on the
// engine: each ends as a cancelled request does, with its last events
// (SSE: a last chunk with finish_reason "cancelled" and a "cancel_reason",
// then [DONE]; WebSocket: a final event likewise), and `drained` is called
// when they have ended, or kCancelGraceSeconds after the cancel if some
// have not. The listener keeps accepting, so that late clients hear 503
// rather than find no server.
//
// stop(): stops accepting, ends whatever still runs with an error (SSE: an
// error event then [DONE]; non-streaming: 503; WebSocket: a final event with
// finish_reason "error", then a close), waits up to kGoodbyeSeconds for the
// sessions to send their last bytes and close, then stops the Asio threads.
// After a drain there is usually nothing left to end but idle connections.
// Destroy the server before the engine and the actor system.
//
// API keys: options.api_key and the keys of options.api_key_file
// (http/key_gate.hpp), read by start() (a file that cannot be read or
// parsed fails the start) and again by reload_api_keys().
//
// While it runs, the server logs (http/server_log.hpp) one access line per
// request (http/request_record.hpp) and, every
// options.log_stats_interval_seconds, the engine's summary
// (http/engine_summary.hpp).
//
// Thread-safety: drain() and reload_api_keys() from any thread; start() and stop() from the thread
// that owns the server, never from the `drained` callback (an Asio thread).
// This header hides Asio, so that tools and tests stay light to compile.
#pragma once

#include <functional>
#include <memory>

#include "http/engine_port.hpp"
#include "http/request_plan.hpp"
#include "http/server_options.hpp"

namespace conveyor::http {

class Server {
 public:
  // After the drain's timeout: how long cancelled requests may take to end.
  static constexpr double kCancelGraceSeconds = 2.0;
  // stop(): how long sessions may take to send their last bytes.
  static constexpr double kGoodbyeSeconds = 2.0;

  Server(EnginePort& engine, ServerOptions options, ModelContext model);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Checks the options (validate_server_options), reads the API keys, binds,
  // listens and starts the Asio threads; the port it listens on. Once: a
  // second call, also after stop(), is an error (a new Server serves again).
  Expected<uint16_t> start();
  // Reads options.api_key_file again (`conveyor serve` does on SIGHUP). The
  // new keys apply from the next request on; a file that cannot be read or
  // parsed changes nothing, and the error (also logged as a warning) says
  // why. Without a key file: an error saying so.
  Status reload_api_keys();
  // A graceful end (above); a second call does nothing. Before start() or
  // after stop(), calls `drained` at once.
  void drain(std::function<void()> drained);
  void stop();

  const ModelContext& model() const;
  const ServerOptions& options() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace conveyor::http
