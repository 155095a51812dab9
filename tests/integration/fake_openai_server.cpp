#include "tests/integration/fake_openai_server.hpp"

#include <algorithm>
#include <mutex>
#include <thread>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/json.hpp>

namespace conveyor::testing {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

struct FakeOpenAiServer::Impl {
  FakeServerOptions options;
  asio::io_context ioc;
  tcp::acceptor acceptor{ioc};
  uint16_t port = 0;
  std::thread thread;
  std::atomic<int64_t> connections{0}, requests{0}, in_flight{0}, max_in_flight{0};
  mutable std::mutex mutex;
  std::string last_body;

  asio::awaitable<void> accept_loop() {
    for (;;) {
      tcp::socket socket = co_await acceptor.async_accept(asio::use_awaitable);
      ++connections;
      // Small SSE writes must not wait for Nagle + delayed ACK (40 ms stalls).
      socket.set_option(tcp::no_delay(true));
      asio::co_spawn(ioc, session(std::move(socket)), asio::detached);
    }
  }

  asio::awaitable<void> session(tcp::socket socket) {
    beast::tcp_stream stream(std::move(socket));
    beast::flat_buffer buffer;
    try {
      for (;;) {
        http::request<http::string_body> req;
        co_await http::async_read(stream, buffer, req, asio::use_awaitable);
        bool keep = req.keep_alive() && options.keep_alive;
        if (req.target() == "/v1/models") {
          co_await write_json(stream, http::status::ok, R"({"object":"list","data":[{"id":"fake-model","object":"model"}]})", keep);
        } else {
          const int64_t n = ++requests;
          {
            std::lock_guard lock(mutex);
            last_body = req.body();
          }
          if (options.fail_every > 0 && n % options.fail_every == 0) {
            co_await write_json(stream, static_cast<http::status>(options.fail_status),
                                R"({"error":{"message":"queue full","type":"rate_limit","param":null,"code":null}})", keep);
          } else {
            const bool truncate = options.truncate_every > 0 && n % options.truncate_every == 0;
            co_await stream_completion(stream, req, keep, truncate);
          }
        }
        if (!keep || options.close_without_notice) break;
      }
    } catch (const std::exception&) {
      // client went away
    }
    beast::error_code ignored;
    stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
  }

  asio::awaitable<void> write_json(beast::tcp_stream& stream, http::status status, std::string body, bool keep) {
    http::response<http::string_body> res{status, 11};
    res.set(http::field::content_type, "application/json");
    res.keep_alive(keep);
    res.body() = std::move(body);
    res.prepare_payload();
    co_await http::async_write(stream, res, asio::use_awaitable);
  }

  static std::string role_event() {
    boost::json::object delta{{"role", "assistant"}, {"content", ""}};
    boost::json::object choice{{"index", 0}, {"delta", delta}};
    return boost::json::serialize(boost::json::object{{"choices", boost::json::array{choice}}});
  }

  static std::string token_event(bool chat, int64_t first, int64_t k, bool last) {
    boost::json::array ids;
    std::string text;
    for (int64_t i = 0; i < k; ++i) {
      ids.push_back(65 + (first + i) % 26);
      text += static_cast<char>('a' + (first + i) % 26);
    }
    boost::json::object choice{{"index", 0}, {"token_ids", ids}};
    if (chat)
      choice["delta"] = boost::json::object{{"content", text}};
    else
      choice["text"] = text;
    choice["finish_reason"] = last ? boost::json::value("length") : boost::json::value(nullptr);
    boost::json::object event{{"object", chat ? "chat.completion.chunk" : "text_completion"},
                              {"choices", boost::json::array{choice}}};
    return boost::json::serialize(event);
  }

  static std::string usage_event(int64_t prompt_tokens, int64_t completion_tokens) {
    boost::json::object usage{{"prompt_tokens", prompt_tokens},
                              {"completion_tokens", completion_tokens},
                              {"total_tokens", prompt_tokens + completion_tokens}};
    return boost::json::serialize(boost::json::object{{"choices", boost::json::array{}}, {"usage", usage}});
  }

  static asio::awaitable<void> send(beast::tcp_stream& stream, std::string json) {
    const std::string event = "data: " + json + "\n\n";
    co_await asio::async_write(stream, http::make_chunk(asio::buffer(event)), asio::use_awaitable);
  }

  asio::awaitable<void> stream_completion(beast::tcp_stream& stream, const http::request<http::string_body>& req,
                                          bool keep, bool truncate) {
    const auto body = boost::json::parse(req.body());
    const bool chat = req.target() == "/v1/chat/completions";
    const int64_t max_tokens = body.at("max_tokens").to_number<int64_t>();
    int64_t prompt_tokens = 0;
    if (chat) {
      prompt_tokens = static_cast<int64_t>(body.at("messages").at(0).at("content").as_string().size());
    } else if (body.at("prompt").is_array()) {
      prompt_tokens = static_cast<int64_t>(body.at("prompt").as_array().size());
    } else {
      prompt_tokens = static_cast<int64_t>(body.at("prompt").as_string().size());
    }

    const int64_t now_in_flight = ++in_flight;
    int64_t seen = max_in_flight.load();
    while (now_in_flight > seen && !max_in_flight.compare_exchange_weak(seen, now_in_flight)) {
    }
    struct Leave {
      std::atomic<int64_t>& n;
      ~Leave() { --n; }
    } leave{in_flight};

    http::response<http::empty_body> res{http::status::ok, 11};
    res.set(http::field::content_type, "text/event-stream");
    res.keep_alive(keep);
    res.chunked(true);
    http::response_serializer<http::empty_body> sr{res};
    co_await http::async_write_header(stream, sr, asio::use_awaitable);

    asio::steady_timer timer(ioc);
    // (GCC 12 miscompiles braced JSON initialisers inside coroutines: build
    // each event in a plain function.)
    if (chat) co_await send(stream, role_event());
    for (int64_t sent = 0; sent < max_tokens;) {
      const int64_t k = std::min<int64_t>(options.tokens_per_chunk, max_tokens - sent);
      co_await send(stream, token_event(chat, sent, k, sent + k == max_tokens));
      sent += k;
      timer.expires_after(options.chunk_delay);
      co_await timer.async_wait(asio::use_awaitable);
    }
    co_await send(stream, usage_event(prompt_tokens, max_tokens));
    if (!truncate) {
      static const std::string done = "data: [DONE]\n\n";
      co_await asio::async_write(stream, http::make_chunk(asio::buffer(done)), asio::use_awaitable);
    }
    co_await asio::async_write(stream, http::make_chunk_last(), asio::use_awaitable);
  }
};

FakeOpenAiServer::FakeOpenAiServer(FakeServerOptions options) : impl_(std::make_unique<Impl>()) {
  impl_->options = options;
  const tcp::endpoint endpoint(asio::ip::make_address("127.0.0.1"), 0);
  impl_->acceptor.open(endpoint.protocol());
  impl_->acceptor.set_option(asio::socket_base::reuse_address(true));
  impl_->acceptor.bind(endpoint);
  impl_->acceptor.listen();
  impl_->port = impl_->acceptor.local_endpoint().port();
  asio::co_spawn(impl_->ioc, impl_->accept_loop(), asio::detached);
  impl_->thread = std::thread([impl = impl_.get()] { impl->ioc.run(); });
}

FakeOpenAiServer::~FakeOpenAiServer() {
  impl_->ioc.stop();
  impl_->thread.join();
}

uint16_t FakeOpenAiServer::port() const { return impl_->port; }
int64_t FakeOpenAiServer::connections() const { return impl_->connections; }
int64_t FakeOpenAiServer::requests() const { return impl_->requests; }
int64_t FakeOpenAiServer::max_in_flight() const { return impl_->max_in_flight; }
std::string FakeOpenAiServer::last_body() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->last_body;
}

}  // namespace conveyor::testing
