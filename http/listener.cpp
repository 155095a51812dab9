#include "http/listener.hpp"

#include <boost/asio/strand.hpp>
#include <boost/beast/core/bind_handler.hpp>

#include "http/http_session.hpp"
#include "http/server_log.hpp"

namespace conveyor::http {

namespace net = boost::asio;
using tcp = net::ip::tcp;

Listener::Listener(net::io_context& ioc, std::shared_ptr<ServerState> state)
    : ioc_(ioc), acceptor_(net::make_strand(ioc)), retry_(acceptor_.get_executor()), state_(std::move(state)) {}

Status Listener::open(const tcp::endpoint& endpoint) {
  boost::system::error_code ec;
  auto fail = [&](const char* what) {
    return Status(make_error(Errc::io_error, std::string(what) + " " + endpoint.address().to_string() + ":" +
                                                 std::to_string(endpoint.port()) + ": " + ec.message()));
  };
  if (acceptor_.open(endpoint.protocol(), ec)) return fail("cannot open a socket for");
  if (acceptor_.set_option(net::socket_base::reuse_address(true), ec)) return fail("cannot set options on");
  if (acceptor_.bind(endpoint, ec)) return fail("cannot bind");
  if (acceptor_.listen(net::socket_base::max_listen_connections, ec)) return fail("cannot listen on");
  return Status::ok();
}

uint16_t Listener::port() const {
  boost::system::error_code ec;
  return acceptor_.local_endpoint(ec).port();
}

void Listener::run() { do_accept(); }

void Listener::stop() {
  net::post(acceptor_.get_executor(), [self = shared_from_this()] {
    boost::system::error_code ignored;
    self->acceptor_.close(ignored);
    self->retry_.cancel();
  });
}

void Listener::close() {
  boost::system::error_code ignored;
  acceptor_.close(ignored);
  retry_.cancel();
}

void Listener::do_accept() {
  acceptor_.async_accept(net::make_strand(ioc_),
                         boost::beast::bind_front_handler(&Listener::on_accept, shared_from_this()));
}

void Listener::on_accept(boost::system::error_code ec, tcp::socket socket) {
  if (ec == net::error::operation_aborted || !acceptor_.is_open()) return;  // stopped
  if (ec) {
    // EMFILE and its kind fail again at once while the connection waits in
    // the backlog: give sessions a moment to close.
    log_warn("accept failed: " + ec.message() + "; retrying shortly",
             {{"open_connections", uint64_t(state_->open_connections())}});
    retry_.expires_after(kAcceptRetry);
    retry_.async_wait([self = shared_from_this()](boost::system::error_code e) {
      if (!e && self->acceptor_.is_open()) self->do_accept();
    });
    return;
  }
  socket.set_option(tcp::no_delay(true), ec);  // token events are small and latency matters
  // Past max_connections the session gets no slot, answers 503 and closes.
  std::make_shared<HttpSession>(std::move(socket), state_, state_->open_connection())->run();
  do_accept();
}

}  // namespace conveyor::http
