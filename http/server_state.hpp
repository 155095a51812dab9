// What every session of one server shares (the Beast chat example's
// "shared_state"): the engine port, the options, the model context, the
// registry of live sessions (for shutdown), and the gate through which actor
// threads post engine events into the io_context.
//
// Why the gate: request actors may outlive the io_context (they end a little
// after the server stops). Posting to a destroyed io_context is undefined, and
// so is destroying a strand executor after it, so the callbacks that actors
// hold keep only a weak_ptr to their session and this state, never an
// executor; post_to() locks the session and posts under the gate's mutex, and
// does nothing once the server has closed the gate (before it destroys the
// io_context).
#pragma once

#include <boost/asio/post.hpp>
#include <atomic>
#include <map>
#include <memory>
#include <mutex>

#include "http/engine_port.hpp"
#include "http/request_plan.hpp"
#include "http/server_options.hpp"

namespace conveyor::http {

// A connection's session, as the server's registry sees it.
class SessionBase {
 public:
  virtual ~SessionBase() = default;
  // Ends the session's requests with an error ("the server is shutting
  // down") and closes it; safe from any thread (posts to its own strand).
  virtual void shutdown() = 0;
};

class ServerState {
 public:
  ServerState(EnginePort& engine, ServerOptions options, ModelContext model)
      : engine_(engine), options_(std::move(options)), model_(std::move(model)) {}

  EnginePort& engine() { return engine_; }
  const ServerOptions& options() const { return options_; }
  const ModelContext& model() const { return model_; }

  uint64_t add_session(std::weak_ptr<SessionBase> session);
  void remove_session(uint64_t id);
  size_t session_count();
  // Asks every live session to shut down; sessions that start later shut
  // down at once.
  void shutdown_sessions();
  bool stopping() const { return stopping_; }

  // Runs handler(session) on the session's strand, unless the session is
  // gone or the gate is closed (any thread). Session::executor() must be a
  // member set at construction.
  template <class Session, class Handler>
  void post_to(const std::weak_ptr<Session>& weak, Handler&& handler) {
    std::lock_guard lock(gate_mutex_);
    if (!gate_open_) return;
    if (auto session = weak.lock()) {
      auto executor = session->executor();
      boost::asio::post(executor, [session = std::move(session), h = std::forward<Handler>(handler)]() mutable {
        h(*session);
      });
    }
  }
  void close_gate() {
    std::lock_guard lock(gate_mutex_);
    gate_open_ = false;
  }

 private:
  EnginePort& engine_;
  const ServerOptions options_;
  const ModelContext model_;
  std::mutex sessions_mutex_;
  uint64_t next_session_ = 1;
  std::map<uint64_t, std::weak_ptr<SessionBase>> sessions_;
  std::atomic<bool> stopping_{false};
  std::mutex gate_mutex_;
  bool gate_open_ = true;
};

}  // namespace conveyor::http
