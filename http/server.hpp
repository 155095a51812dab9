// The HTTP/WebSocket server: a listener, Asio threads, and the shared state
// of its sessions, in front of one engine (through an EnginePort).
//
//   http::Server server(port, options, std::move(model_context));
//   auto bound = server.start();     // the port (options.port 0: any free one)
//   ...
//   server.stop();                   // also done by the destructor
//
// stop(): stops accepting, ends in-flight requests with an error (SSE: an
// error event then [DONE]; non-streaming: 503; WebSocket: a final event with
// finish_reason "error", then a close), waits up to shutdown_grace_seconds
// for the sessions to finish, then stops the Asio threads. Destroy the server
// before the engine and the actor system.
//
// This header hides Asio, so that tools and tests stay light to compile.
#pragma once

#include <memory>

#include "http/engine_port.hpp"
#include "http/request_plan.hpp"
#include "http/server_options.hpp"

namespace conveyor::http {

class Server {
 public:
  Server(EnginePort& engine, ServerOptions options, ModelContext model);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds, listens and starts the Asio threads; the port it listens on.
  Expected<uint16_t> start();
  void stop();

  const ModelContext& model() const;
  const ServerOptions& options() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace conveyor::http
