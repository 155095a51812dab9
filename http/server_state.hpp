// What every session of one server shares (the Beast chat example's
// "shared_state"): the engine port, the options, the model context, the
// registry of live sessions (for shutdown), the drain's state (whether new
// requests are refused, how many run on the engine), the API keys and their
// limits (http/key_gate.hpp), the stored responses of the Responses API
// (http/response_store.hpp), the count of open connections
// (max_connections), what the limits refused (for /metrics), the threads
// that plan requests off the I/O threads, and the gate through which actor
// threads post engine events into the io_context.
//
// Why the gate: stream actors may outlive the io_context (they end a little
// after the server stops). Posting to a destroyed io_context is undefined, and
// so is destroying a strand executor after it, so the callbacks that actors
// hold keep only a weak_ptr to their session and this state, never an
// executor; post_to() locks the session and posts under the gate's mutex, and
// does nothing once the server has closed the gate (before it destroys the
// io_context).
#pragma once

#include <boost/asio/post.hpp>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <utility>

#include "http/engine_port.hpp"
#include "http/key_gate.hpp"
#include "http/plan_lanes.hpp"
#include "http/refusal_counters.hpp"
#include "http/request_plan.hpp"
#include "http/response_store.hpp"
#include "http/server_options.hpp"
#include "http/work_queue.hpp"

namespace conveyor::http {

// A connection's session, as the server's registry sees it.
class SessionBase {
 public:
  virtual ~SessionBase() = default;
  // Ends the session's requests with an error ("the server is shutting
  // down") and closes it; safe from any thread (posts to its own strand).
  virtual void shutdown() = 0;
  // Cancels the session's requests on the engine; each ends with its last
  // events, finish_reason "cancelled" and `reason` (the drain ran out of
  // time). Any thread.
  virtual void cancel_requests(const std::string& reason) = 0;
};

class ServerState;

// One open connection's place under max_connections, held by the session
// that owns the socket (HTTP, then WebSocket after an upgrade) until it goes.
class ConnectionSlot {
 public:
  ConnectionSlot() = default;  // none: the connection was over the cap
  explicit ConnectionSlot(ServerState* state) : state_(state) {}
  ~ConnectionSlot();
  ConnectionSlot(ConnectionSlot&& other) noexcept : state_(std::exchange(other.state_, nullptr)) {}
  ConnectionSlot& operator=(ConnectionSlot&&) = delete;
  ConnectionSlot(const ConnectionSlot&) = delete;
  explicit operator bool() const { return state_ != nullptr; }

 private:
  ServerState* state_ = nullptr;
};

class ServerState {
 public:
  ServerState(EnginePort& engine, ServerOptions options, ModelContext model)
      : engine_(engine),
        options_(std::move(options)),
        model_(std::move(model)),
        responses_(ResponseStoreLimits{options_.responses_ttl_seconds, options_.responses_max,
                                       options_.responses_max_bytes},
                   [&engine](const std::string& session) { engine.release_session(session); }),
        quick_compiler_(std::max(1, options_.io_threads)),
        slow_compiler_(std::max(1, options_.io_threads)),
        planner_(std::max(1, options_.io_threads)) {}

  EnginePort& engine() { return engine_; }
  const ServerOptions& options() const { return options_; }
  const ModelContext& model() const { return model_; }

  uint64_t add_session(std::weak_ptr<SessionBase> session);
  void remove_session(uint64_t id);
  size_t session_count();
  // Blocks until no session is left or `deadline` passes; true when none is left.
  bool wait_sessions_closed(std::chrono::steady_clock::time_point deadline);
  // Asks every live session to shut down; sessions that start later shut
  // down at once.
  void shutdown_sessions();
  bool stopping() const { return stopping_; }

  // The drain. From begin_drain() on, sessions answer new requests with 503
  // (WebSocket requests with an error event); requests already running go on.
  void begin_drain() { draining_ = true; }
  bool draining() const { return draining_; }
  // Requests running on the engine (RequestRecord::run_on_engine counts them).
  void request_started();
  void request_ended();
  size_t requests_in_flight();
  // Calls `idle` once, as soon as no request is in flight: at once (on this
  // thread) if none is, else on the thread that ends the last one. A null
  // `idle` withdraws the one set before.
  void when_idle(std::function<void()> idle);
  // SessionBase::cancel_requests on every live session.
  void cancel_requests(const std::string& reason);

  // The API keys (set by Server::start and reload_api_keys) and their limits.
  KeyGate& keys() { return keys_; }
  // The Responses API's stored responses (they let go of their engine sessions).
  ResponseStore& responses() { return responses_; }
  RefusalCounters& refusals() { return refusals_; }
  // A slot for a new connection, or an empty one past max_connections.
  ConnectionSlot open_connection();
  size_t open_connections() const { return connections_.load(); }

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
  // Posts `handler` to `executor` unless the gate is closed (any thread).
  template <class Executor, class Handler>
  void post_guarded(const Executor& executor, Handler&& handler) {
    std::lock_guard lock(gate_mutex_);
    if (gate_open_) boost::asio::post(executor, std::forward<Handler>(handler));
  }
  // Runs work() on a planning thread (as many as io_threads), then
  // then(session, result) on the session's strand, unless the session is
  // gone or the gate is closed (any thread). Parsing and planning a request
  // (its chat template, the tokenizer, a grammar to compile) would stall the
  // I/O thread's other connections. A request whose grammar is not compiled
  // yet is planned again on a compiling thread (as many for small grammars,
  // as many for large ones; http/plan_lanes.hpp), so a large new schema does
  // not hold up the requests behind it. `work` may
  // run twice and must not hold the session or this state: a planning thread
  // must never drop the last reference to either (their destructors join it).
  //
  // The returned function (any thread) withdraws the request: it leaves its
  // queue, work not started does not run, and `then` is not called. Work for
  // a session that is gone does not run either.
  template <class Session, class Work, class Then>
  std::function<void()> plan(const std::weak_ptr<Session>& weak, Work work, Then then) {
    auto withdrawn = std::make_shared<std::atomic<bool>>(false);
    auto leave = plan_in_lanes(
        planner_, CompilingLanes{quick_compiler_, slow_compiler_}, std::move(work),
        [weak, withdrawn] { return !*withdrawn && !weak.expired(); },
        [this, weak, withdrawn, then = std::move(then)](auto result) {
          post_to(weak, [result = std::move(result), withdrawn, then](Session& s) mutable {
            if (!*withdrawn) then(s, std::move(result));
          });
        });
    return [withdrawn, leave = std::move(leave)] {
      withdrawn->store(true);
      leave();  // out of its queue: what it holds (a request of up to max_body_bytes) goes now
    };
  }
  void close_gate() {
    std::lock_guard lock(gate_mutex_);
    gate_open_ = false;
  }

 private:
  EnginePort& engine_;
  const ServerOptions options_;
  const ModelContext model_;
  ResponseStore responses_;
  std::vector<std::shared_ptr<SessionBase>> live_sessions();

  std::mutex sessions_mutex_;
  std::condition_variable sessions_closed_;
  uint64_t next_session_ = 1;
  std::map<uint64_t, std::weak_ptr<SessionBase>> sessions_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> draining_{false};
  std::mutex in_flight_mutex_;
  size_t in_flight_ = 0;
  std::function<void()> when_idle_;
  std::mutex gate_mutex_;
  bool gate_open_ = true;
  KeyGate keys_;
  RefusalCounters refusals_;
  friend class ConnectionSlot;
  std::atomic<size_t> connections_{0};
  // Planning that compiles a grammar, small ones and large ones (before
  // planner_, whose jobs submit to them).
  WorkQueue quick_compiler_;
  WorkQueue slow_compiler_;
  WorkQueue planner_;   // last: joined first, while what its jobs use is there
};

}  // namespace conveyor::http
