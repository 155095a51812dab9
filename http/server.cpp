#include "http/server.hpp"

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <chrono>
#include <optional>
#include <thread>
#include <vector>

#include "http/listener.hpp"
#include "http/server_state.hpp"

namespace conveyor::http {

namespace net = boost::asio;
using tcp = net::ip::tcp;

struct Server::Impl {
  // Declared first so it is destroyed last: the listener and the sessions
  // still referenced by queued handlers need it.
  net::io_context ioc;
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work;
  std::shared_ptr<ServerState> state;
  std::shared_ptr<Listener> listener;
  std::vector<std::thread> threads;
  bool running = false;

  Impl(EnginePort& engine, ServerOptions options, ModelContext model)
      : ioc(std::max(1, options.io_threads)),
        state(std::make_shared<ServerState>(engine, std::move(options), std::move(model))) {}
};

Server::Server(EnginePort& engine, ServerOptions options, ModelContext model)
    : impl_(std::make_unique<Impl>(engine, std::move(options), std::move(model))) {}

Server::~Server() { stop(); }

const ModelContext& Server::model() const { return impl_->state->model(); }
const ServerOptions& Server::options() const { return impl_->state->options(); }

Expected<uint16_t> Server::start() {
  const ServerOptions& o = impl_->state->options();
  boost::system::error_code ec;
  tcp::resolver resolver(impl_->ioc);
  auto endpoints = resolver.resolve(o.host, std::to_string(o.port), tcp::resolver::passive, ec);
  if (ec || endpoints.empty())
    return make_error(Errc::invalid_argument, "--host: cannot resolve '" + o.host + "': " + ec.message());
  impl_->listener = std::make_shared<Listener>(impl_->ioc, impl_->state);
  if (Status s = impl_->listener->open(endpoints.begin()->endpoint()); !s) return s.error();
  const uint16_t port = impl_->listener->port();
  impl_->listener->run();
  impl_->work.emplace(impl_->ioc.get_executor());
  for (int i = 0; i < std::max(1, o.io_threads); ++i) impl_->threads.emplace_back([this] { impl_->ioc.run(); });
  impl_->running = true;
  return port;
}

void Server::stop() {
  Impl& m = *impl_;
  if (!m.running) return;
  m.running = false;
  m.listener->stop();
  m.state->shutdown_sessions();
  // Let sessions send their last events and close; a client that does not
  // read cannot hold the shutdown longer than the grace period.
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(int64_t(m.state->options().shutdown_grace_seconds * 1000));
  while (m.state->session_count() > 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  m.work.reset();
  m.ioc.stop();
  for (std::thread& t : m.threads) t.join();
  m.threads.clear();
  // From here on, actor threads post nothing into the io_context.
  m.state->close_gate();
}

}  // namespace conveyor::http
