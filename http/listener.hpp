// Accepts TCP connections and starts an HttpSession on each, each on its own
// strand (so a session's handlers never run concurrently). Every connection
// is accepted, so that one past max_connections hears why (503) rather than
// wait in the kernel's backlog. When accept itself fails (out of file
// descriptors: the process's limit must be above max_connections), the
// listener waits kAcceptRetry before it tries again rather than spin.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <memory>

#include "http/server_state.hpp"

namespace conveyor::http {

class Listener : public std::enable_shared_from_this<Listener> {
 public:
  static constexpr std::chrono::milliseconds kAcceptRetry{100};

  Listener(boost::asio::io_context& ioc, std::shared_ptr<ServerState> state);

  // Binds and listens (before the io_context runs).
  Status open(const boost::asio::ip::tcp::endpoint& endpoint);
  uint16_t port() const;
  void run();
  // Stops accepting (any thread).
  void stop();
  // Closes the listening socket at once, from the thread that owns the
  // server once its I/O threads have stopped (stop()'s close may not have run
  // before they did: the port would accept connections nobody answers).
  void close();

 private:
  void do_accept();
  void on_accept(boost::system::error_code ec, boost::asio::ip::tcp::socket socket);

  boost::asio::io_context& ioc_;
  boost::asio::ip::tcp::acceptor acceptor_;
  boost::asio::steady_timer retry_;  // on the acceptor's strand
  std::shared_ptr<ServerState> state_;
};

}  // namespace conveyor::http
