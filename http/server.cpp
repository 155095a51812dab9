#include "http/server.hpp"

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <optional>
#include <thread>
#include <vector>

#include "http/api_key_file.hpp"
#include "http/engine_summary.hpp"
#include "http/listener.hpp"
#include "http/serve_settings.hpp"
#include "http/server_log.hpp"
#include "http/server_state.hpp"

namespace conveyor::http {

namespace net = boost::asio;
using tcp = net::ip::tcp;

namespace {

std::string seconds_text(double seconds) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g s", seconds);
  return buf;
}

}  // namespace

struct Server::Impl {
  // Declared first so it is destroyed last: the listener, the timers and the
  // sessions still referenced by queued handlers need it.
  net::io_context ioc;
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work;
  std::shared_ptr<ServerState> state;
  std::shared_ptr<Listener> listener;
  std::vector<std::thread> threads;
  std::atomic<bool> running{false};
  bool started = false;  // start() runs once (stop() closes the state for good)

  // The drain and the engine summary: their state is touched only on this strand.
  net::strand<net::io_context::executor_type> control;
  net::steady_timer drain_timer;
  net::steady_timer stats_timer;
  bool drain_started = false;
  std::function<void()> drained;  // set while a drain waits
  std::shared_ptr<EngineSummary> summary = std::make_shared<EngineSummary>();

  Impl(EnginePort& engine, ServerOptions options, ModelContext model)
      : ioc(std::max(1, options.io_threads)),
        state(std::make_shared<ServerState>(engine, std::move(options), std::move(model))),
        control(net::make_strand(ioc)),
        drain_timer(control),
        stats_timer(control) {}

  void begin_drain(std::function<void()> done);
  void on_drain_timeout();
  void finish_drain();
  void arm_stats();
};

void Server::Impl::begin_drain(std::function<void()> done) {
  if (drain_started) return;
  drain_started = true;
  drained = std::move(done);
  state->begin_drain();
  const double timeout = state->options().shutdown_timeout_seconds;
  log_info("draining: new requests get 503; running requests may take up to " + seconds_text(timeout),
           {{"requests_in_flight", uint64_t(state->requests_in_flight())}, {"shutdown_timeout_s", timeout}});
  drain_timer.expires_after(millis(timeout));
  drain_timer.async_wait([this](boost::system::error_code ec) {
    if (!ec) on_drain_timeout();
  });
  // Called by the session that ends the last request (or at once): come
  // back to this strand, unless the server has stopped meanwhile.
  state->when_idle([this] { state->post_guarded(control, [this] { finish_drain(); }); });
}

void Server::Impl::on_drain_timeout() {
  const size_t left = state->requests_in_flight();
  if (left == 0) return finish_drain();
  const double timeout = state->options().shutdown_timeout_seconds;
  log_warn("shutdown timeout passed: cancelling the requests still running",
           {{"requests_in_flight", uint64_t(left)}, {"shutdown_timeout_s", timeout}});
  state->cancel_requests("the server is shutting down: the request had not ended when its shutdown_timeout (" +
                         seconds_text(timeout) + ") passed");
  drain_timer.expires_after(millis(kCancelGraceSeconds));
  drain_timer.async_wait([this](boost::system::error_code ec) {
    if (ec) return;
    log_warn("cancelled requests did not end in time; stopping anyway",
             {{"requests_in_flight", uint64_t(state->requests_in_flight())}});
    finish_drain();
  });
}

void Server::Impl::finish_drain() {
  if (!drained) return;
  drain_timer.cancel();
  state->when_idle(nullptr);
  log_info("drained");
  std::function<void()> done = std::move(drained);
  drained = nullptr;
  done();
}

void Server::Impl::arm_stats() {
  stats_timer.expires_after(millis(state->options().log_stats_interval_seconds));
  stats_timer.async_wait([this](boost::system::error_code ec) {
    if (ec) return;
    // The answer comes on an actor thread; what it needs is shared, so it
    // may come after the server has gone.
    state->engine().stats_async([summary = summary, state = state](Expected<EngineStats> stats) {
      if (stats) summary->log(*stats, state->requests_in_flight());
    });
    arm_stats();
  });
}

Server::Server(EnginePort& engine, ServerOptions options, ModelContext model)
    : impl_(std::make_unique<Impl>(engine, std::move(options), std::move(model))) {
  if (const auto& constraints = impl_->state->model().constraints)
    constraints->set_cache_bytes(impl_->state->options().grammar_cache_max_bytes);
}

Server::~Server() { stop(); }

const ModelContext& Server::model() const { return impl_->state->model(); }
const ServerOptions& Server::options() const { return impl_->state->options(); }

Status Server::reload_api_keys() {
  const ServerOptions& o = impl_->state->options();
  if (o.api_key_file.empty())
    return make_error(Errc::invalid_argument, "no API key file to reload (--api-key-file is not set)");
  auto keys = api_keys_of(o);
  if (!keys) {
    log_warn("API key file not reloaded; the keys stay as they were: " + keys.error().message,
             {{"api_key_file", o.api_key_file}});
    return keys.error();
  }
  impl_->state->keys().set_keys(*keys);
  log_info("API keys reloaded", {{"api_key_file", o.api_key_file}, {"keys", uint64_t(keys->size())}});
  return Status::ok();
}

Expected<uint16_t> Server::start() {
  if (impl_->started)
    return make_error(Errc::invalid_argument, "a Server starts once: construct a new one to serve again");
  const ServerOptions& o = impl_->state->options();
  if (Status s = validate_server_options(o); !s) return s.error();
  auto keys = api_keys_of(o);
  if (!keys) return keys.error();
  impl_->state->keys().set_keys(*keys);
  boost::system::error_code ec;
  tcp::resolver resolver(impl_->ioc);
  auto endpoints = resolver.resolve(o.host, std::to_string(o.port), tcp::resolver::passive, ec);
  if (ec || endpoints.empty())
    return make_error(Errc::invalid_argument, "--host: cannot resolve '" + o.host + "': " + ec.message());
  impl_->listener = std::make_shared<Listener>(impl_->ioc, impl_->state);
  if (Status s = impl_->listener->open(endpoints.begin()->endpoint()); !s) return s.error();
  const uint16_t port = impl_->listener->port();
  impl_->listener->run();
  impl_->started = true;
  if (o.log_stats_interval_seconds > 0) net::post(impl_->control, [m = impl_.get()] { m->arm_stats(); });
  impl_->work.emplace(impl_->ioc.get_executor());
  for (int i = 0; i < std::max(1, o.io_threads); ++i) impl_->threads.emplace_back([this] { impl_->ioc.run(); });
  impl_->running = true;
  return port;
}

void Server::drain(std::function<void()> drained) {
  Impl& m = *impl_;
  if (!m.running) {
    if (drained) drained();
    return;
  }
  m.state->post_guarded(m.control, [&m, drained = std::move(drained)]() mutable { m.begin_drain(std::move(drained)); });
}

void Server::stop() {
  Impl& m = *impl_;
  if (!m.running) return;
  m.running = false;
  m.state->when_idle(nullptr);
  m.listener->stop();
  m.state->shutdown_sessions();
  // Let sessions send their last events and close; a client that does not
  // read cannot hold the shutdown longer than this.
  m.state->wait_sessions_closed(std::chrono::steady_clock::now() + millis(kGoodbyeSeconds));
  m.work.reset();
  m.ioc.stop();
  for (std::thread& t : m.threads) t.join();
  m.threads.clear();
  m.listener->close();  // no thread runs its handlers now
  // From here on, actor threads post nothing into the io_context.
  m.state->close_gate();
}

}  // namespace conveyor::http
