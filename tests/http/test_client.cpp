#include "tests/http/test_client.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <cstdio>
#include <fstream>
#include <utility>

namespace conveyor::http::testing {
namespace {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace websocket = boost::beast::websocket;
namespace net = boost::asio;
using tcp = net::ip::tcp;

// Runs `ioc` until the started operation sets `done` or the timeout passes;
// on timeout the socket is closed (which ends the operation) and false returned.
template <class Socket>
bool run_until(net::io_context& ioc, const bool& done, Socket& socket, std::chrono::milliseconds timeout) {
  ioc.restart();
  ioc.run_for(timeout);
  if (done) return true;
  beast::error_code ignored;
  socket.close(ignored);
  ioc.restart();
  ioc.run();
  return false;
}

std::string lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool connect(tcp::socket& socket, uint16_t port, Response& out) {
  beast::error_code ec;
  socket.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), port), ec);
  if (ec) out.error = "connect: " + ec.message();
  return !ec;
}

void send_request(tcp::socket& socket, const std::string& method, const std::string& target,
                  const std::string& body, const Headers& headers) {
  bhttp::request<bhttp::string_body> req{bhttp::string_to_verb(method), target, 11};
  req.set(bhttp::field::host, "127.0.0.1");
  if (!body.empty()) req.set(bhttp::field::content_type, "application/json");
  for (const auto& [name, value] : headers) req.set(name, value);
  req.body() = body;
  req.prepare_payload();
  beast::error_code ignored;  // a server that answers early (413) may stop reading: read its answer anyway
  bhttp::write(socket, req, ignored);
}

template <class Body>
void copy_head(const bhttp::response<Body>& res, Response& out) {
  out.status = int(res.result_int());
  for (const auto& field : res) out.headers[lower(std::string(field.name_string()))] = std::string(field.value());
}

}  // namespace

Response http_request(uint16_t port, const std::string& method, const std::string& target,
                      const std::string& body, const Headers& headers) {
  Response out;
  net::io_context ioc;
  tcp::socket socket(ioc);
  if (!connect(socket, port, out)) return out;
  send_request(socket, method, target, body, headers);
  beast::flat_buffer buffer;
  bhttp::response_parser<bhttp::string_body> parser;
  parser.body_limit(64 << 20);
  parser.skip(method == "HEAD");  // its Content-Length is a GET's; no body follows
  bool done = false;
  beast::error_code ec;
  bhttp::async_read(socket, buffer, parser, [&](beast::error_code e, std::size_t) {
    ec = e;
    done = true;
  });
  if (!run_until(ioc, done, socket, kTimeout)) {
    out.error = "timed out";
    return out;
  }
  if (ec) {
    out.error = "read: " + ec.message();
    return out;
  }
  copy_head(parser.get(), out);
  out.body = parser.get().body();
  return out;
}

Response sse_request(uint16_t port, const std::string& target, const std::string& body,
                     const std::function<bool(const std::string&)>& on_event, const Headers& headers) {
  Response out;
  net::io_context ioc;
  tcp::socket socket(ioc);
  if (!connect(socket, port, out)) return out;
  send_request(socket, "POST", target, body, headers);
  beast::flat_buffer buffer;
  bhttp::response_parser<bhttp::string_body> parser;
  parser.body_limit(64 << 20);
  std::string pending;  // chunk bytes not yet split into events
  auto on_chunk = [&](std::uint64_t remain, beast::string_view data, beast::error_code& ec) {
    if (remain == data.size()) ec = bhttp::error::end_of_chunk;  // hand each chunk back to us
    pending.append(data.data(), data.size());
    out.body.append(data.data(), data.size());
    return data.size();
  };
  parser.on_chunk_body(on_chunk);  // held by reference: it must outlive the reads
  bool done = false;
  beast::error_code ec;
  bhttp::async_read_header(socket, buffer, parser, [&](beast::error_code e, std::size_t) {
    ec = e;
    done = true;
  });
  if (!run_until(ioc, done, socket, kTimeout) || ec) {
    out.error = ec ? ec.message() : "timed out";
    return out;
  }
  copy_head(parser.get(), out);
  while (!parser.is_done()) {
    done = false;
    bhttp::async_read(socket, buffer, parser, [&](beast::error_code e, std::size_t) {
      ec = e;
      done = true;
    });
    if (!run_until(ioc, done, socket, kTimeout)) {
      out.error = "timed out";
      return out;
    }
    if (ec && ec != bhttp::error::end_of_chunk) {
      out.error = ec.message();
      return out;
    }
    for (size_t end; (end = pending.find("\n\n")) != std::string::npos;) {
      std::string event = pending.substr(0, end);
      pending.erase(0, end + 2);
      // "data: JSON", or "event: TYPE\ndata: JSON" (the Responses API's)
      const size_t data = event.rfind("data: ", 0) == 0 ? 0 : event.find("\ndata: ");
      if (data == std::string::npos) continue;
      if (!on_event(event.substr(data == 0 ? 6 : data + 7))) {
        beast::error_code ignored;
        socket.shutdown(tcp::socket::shutdown_both, ignored);
        socket.close(ignored);
        return out;
      }
    }
  }
  if (!parser.chunked()) out.body = parser.get().body();
  return out;
}

std::vector<std::string> sse_payloads(const std::string& body) {
  std::vector<std::string> out;
  size_t pos = 0;
  for (size_t end; (end = body.find("\n\n", pos)) != std::string::npos; pos = end + 2) {
    const std::string event = body.substr(pos, end - pos);
    if (event.rfind("data: ", 0) == 0) out.push_back(event.substr(6));
  }
  return out;
}

// ---- WebSocket -------------------------------------------------------------------------

struct WsClient::Impl {
  net::io_context ioc;
  websocket::stream<tcp::socket> ws{ioc};
  beast::flat_buffer buffer;
  int status = 0;
  bool open = false;
};

WsClient::WsClient(uint16_t port, const Headers& headers) : impl_(std::make_unique<Impl>()) {
  Response ignored;
  if (!connect(impl_->ws.next_layer(), port, ignored)) return;
  impl_->ws.set_option(websocket::stream_base::decorator([headers](websocket::request_type& req) {
    for (const auto& [name, value] : headers) req.set(name, value);
  }));
  websocket::response_type res;
  beast::error_code ec;
  impl_->ws.handshake(res, "127.0.0.1", "/v1/ws", ec);
  impl_->status = int(res.result_int());
  impl_->open = !ec;
}

WsClient::~WsClient() = default;
bool WsClient::connected() const { return impl_->open; }
int WsClient::upgrade_status() const { return impl_->status; }

void WsClient::send(const std::string& text) {
  if (!impl_->open) return;
  beast::error_code ec;
  impl_->ws.text(true);
  impl_->ws.write(net::buffer(text), ec);
  if (ec) impl_->open = false;
}

std::optional<std::string> WsClient::read(std::chrono::milliseconds timeout) {
  if (!impl_->open) return std::nullopt;
  bool done = false;
  beast::error_code ec;
  impl_->ws.async_read(impl_->buffer, [&](beast::error_code e, std::size_t) {
    ec = e;
    done = true;
  });
  if (!run_until(impl_->ioc, done, impl_->ws.next_layer(), timeout) || ec) {
    impl_->open = false;
    return std::nullopt;
  }
  std::string text = beast::buffers_to_string(impl_->buffer.data());
  impl_->buffer.consume(impl_->buffer.size());
  return text;
}

void WsClient::close() {
  if (!impl_->open) return;
  impl_->open = false;
  bool done = false;
  impl_->ws.async_close(websocket::close_code::normal, [&](beast::error_code) { done = true; });
  run_until(impl_->ioc, done, impl_->ws.next_layer(), kTimeout);
}

void WsClient::drop() {
  impl_->open = false;
  beast::error_code ignored;
  impl_->ws.next_layer().close(ignored);
}

int WsClient::close_code() const { return int(impl_->ws.reason().code); }

// ---- raw TCP ---------------------------------------------------------------------------

struct RawClient::Impl {
  net::io_context ioc;
  tcp::socket socket{ioc};
  bool open = false;
  std::string received;

  // One read of whatever comes within `timeout`: false when the connection closed.
  bool read_some(std::chrono::milliseconds timeout) {
    char buf[4096];
    bool done = false;
    beast::error_code ec;
    std::size_t n = 0;
    socket.async_read_some(net::buffer(buf), [&](beast::error_code e, std::size_t bytes) {
      ec = e;
      n = bytes;
      done = true;
    });
    ioc.restart();
    ioc.run_for(timeout);
    if (!done) {
      socket.cancel();  // the read ends with operation_aborted: still open
      ioc.restart();
      ioc.run();
      return true;
    }
    received.append(buf, n);
    if (ec) open = false;
    return !ec;
  }
};

RawClient::RawClient(uint16_t port) : impl_(std::make_unique<Impl>()) {
  Response ignored;
  impl_->open = connect(impl_->socket, port, ignored);
}

RawClient::~RawClient() = default;
bool RawClient::connected() const { return impl_->open; }
const std::string& RawClient::received() const { return impl_->received; }

std::string RawClient::take_received() { return std::exchange(impl_->received, std::string()); }

void RawClient::close() {
  impl_->open = false;
  beast::error_code ignored;
  impl_->socket.close(ignored);
}

bool RawClient::send(const std::string& bytes) {
  if (!impl_->open) return false;
  beast::error_code ec;
  net::write(impl_->socket, net::buffer(bytes), ec);
  if (ec) impl_->open = false;
  return !ec;
}

bool RawClient::wait_closed(std::chrono::milliseconds timeout, std::string* received) {
  const size_t before = impl_->received.size();
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  bool closed = !impl_->open;
  while (!closed) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    closed = !impl_->read_some(left);
  }
  if (received) received->append(impl_->received, before);
  return closed;
}

bool RawClient::read_until(const std::string& text, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (impl_->received.find(text) == std::string::npos) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (!impl_->open || left.count() <= 0) return false;
    impl_->read_some(left);
  }
  return true;
}

// ---- curl ------------------------------------------------------------------------------

namespace {

std::string shell_quote(const std::string& arg) {
  std::string out = "'";
  for (char c : arg) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace

bool curl_available() { return std::system("curl --version > /dev/null 2>&1") == 0; }

CurlResult curl(const std::vector<std::string>& args, const std::optional<std::string>& data) {
  CurlResult result;
  std::string command = "curl -sS --max-time 30";
  char data_path[] = "/tmp/conveyor_curl_XXXXXX";
  if (data) {
    const int fd = mkstemp(data_path);
    if (fd < 0) return result;
    ::close(fd);
    std::ofstream(data_path, std::ios::binary) << *data;
    command += " --data-binary @" + std::string(data_path);
  }
  for (const std::string& a : args) command += " " + shell_quote(a);
  command += " -w '\\n%{http_code}' 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return result;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, pipe)) > 0;) result.body.append(buf, n);
  const int status = pclose(pipe);
  if (data) std::remove(data_path);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  const size_t newline = result.body.rfind('\n');
  if (newline != std::string::npos) {
    result.http_status = std::atoi(result.body.c_str() + newline + 1);
    result.body.resize(newline);
  }
  return result;
}

}  // namespace conveyor::http::testing
