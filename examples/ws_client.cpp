// A WebSocket client for `conveyor serve`: three requests in flight at once
// on one socket (/v1/ws), their deltas interleaved as the engine batches
// them, and one of them cancelled half-way.
//
//   build-dir/conveyor serve &                 (another shell; port 8000)
//   build-dir/examples/ws_client [--port 8000] [--host 127.0.0.1] [--model NAME] [--api-key KEY]
//
// The protocol (README.md, http/websocket_session.hpp): the client sends
//   {"id": ID, "prompt": ... | "messages": [...], <the completion fields>}
//   {"type": "cancel", "id": ID}
// and the server answers, per request, {"type": "delta", "id", "text", ...}
// as text comes and one {"type": "final", "id", "finish_reason", "usage"};
// {"type": "error", "id", "error"} for a message it cannot run.
//
// The client is asynchronous on one thread, as Beast's examples are: one
// read always pending, writes queued and sent one at a time.
#include <CLI/CLI.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/websocket.hpp>
#include <boost/json.hpp>
#include <cstdio>
#include <deque>
#include <map>
#include <memory>
#include <string>

#include "base/cli_checks.hpp"
#include "examples/printable.hpp"

namespace beast = boost::beast;
namespace websocket = beast::websocket;
namespace net = boost::asio;
namespace json = boost::json;
using tcp = net::ip::tcp;

namespace {

struct Options {
  std::string host = "127.0.0.1";
  uint16_t port = 8000;
  std::string model;    // the "model" field; empty: left out (the served model)
  std::string api_key;  // sent as "Authorization: Bearer KEY" with the upgrade
  int cancel_after = 8;
  int timeout_seconds = 60;
};

// One request of ours and what came back for it.
struct Request {
  json::object body;         // what was sent (without "id")
  std::string text;
  int deltas = 0;
  int tokens = 0;            // token ids received (return_token_ids)
  bool cancel_sent = false;
  bool retried = false;      // resent with token ids (the model has no tokenizer)
  std::string finish;        // set by the final event
  int64_t completion_tokens = 0;
};

class Client : public std::enable_shared_from_this<Client> {
 public:
  Client(net::io_context& ioc, Options options)
      : resolver_(ioc), ws_(ioc), deadline_(ioc), options_(std::move(options)) {}

  void run() {
    add("story", json::object{{"prompt", "Once upon a time"}, {"max_tokens", 24}, {"seed", 1}});
    // Long enough to be cancelled half-way: it cannot end on its own before
    // 2000 tokens (or the model's context, if that is shorter).
    add("long", json::object{{"prompt", "A very long story:"}, {"max_tokens", 2000}, {"ignore_eos", true}});
    add("chat", json::object{{"messages", json::array{json::object{{"role", "user"}, {"content", "Say hello"}}}},
                             {"max_tokens", 16}});
    deadline_.expires_after(std::chrono::seconds(options_.timeout_seconds));
    deadline_.async_wait([self = shared_from_this()](beast::error_code ec) {
      if (ec) return;  // cancelled: all went well
      std::fprintf(stderr, "no answer within %d s\n", self->options_.timeout_seconds);
      self->failed_ = true;
      beast::error_code ignored;
      beast::get_lowest_layer(self->ws_).socket().close(ignored);
    });
    resolver_.async_resolve(options_.host, std::to_string(options_.port),
                            beast::bind_front_handler(&Client::on_resolve, shared_from_this()));
  }

  bool ok() const { return !failed_; }
  const std::map<std::string, Request>& requests() const { return requests_; }
  int interleavings() const { return switches_; }

 private:
  void add(const std::string& id, json::object body) {
    body["return_token_ids"] = true;  // deltas carry token ids (and come even without text)
    if (!options_.model.empty()) body["model"] = options_.model;
    requests_[id].body = std::move(body);
  }

  void fail(beast::error_code ec, const char* what) {
    std::fprintf(stderr, "%s: %s\n", what, ec.message().c_str());
    failed_ = true;
    deadline_.cancel();
  }

  void on_resolve(beast::error_code ec, tcp::resolver::results_type results) {
    if (ec) return fail(ec, "resolve");
    beast::get_lowest_layer(ws_).async_connect(results,
                                               beast::bind_front_handler(&Client::on_connect, shared_from_this()));
  }

  void on_connect(beast::error_code ec, tcp::resolver::results_type::endpoint_type) {
    if (ec) return fail(ec, "connect");
    if (!options_.api_key.empty()) {
      ws_.set_option(websocket::stream_base::decorator([key = options_.api_key](websocket::request_type& req) {
        req.set(beast::http::field::authorization, "Bearer " + key);
      }));
    }
    const std::string host = options_.host + ":" + std::to_string(options_.port);
    ws_.async_handshake(host, "/v1/ws", beast::bind_front_handler(&Client::on_handshake, shared_from_this()));
  }

  void on_handshake(beast::error_code ec) {
    if (ec) return fail(ec, "handshake");
    std::printf("connected to ws://%s:%u/v1/ws\n", options_.host.c_str(), unsigned(options_.port));
    // All requests at once, on the one socket.
    for (auto& [id, r] : requests_) send_request(id, r);
    do_read();
  }

  void send_request(const std::string& id, const Request& r) {
    json::object message = r.body;
    message["id"] = id;
    send(json::serialize(message));
  }

  // ---- reading ----------------------------------------------------------------

  void do_read() { ws_.async_read(buffer_, beast::bind_front_handler(&Client::on_read, shared_from_this())); }

  void on_read(beast::error_code ec, std::size_t) {
    if (ec) return fail(ec, "read");
    const std::string text = beast::buffers_to_string(buffer_.data());
    buffer_.consume(buffer_.size());
    json::error_code jec;
    json::value message = json::parse(text, jec);
    if (jec || !message.is_object()) {
      std::fprintf(stderr, "not a JSON object: %s\n", text.c_str());
      failed_ = true;
    } else {
      handle(message.as_object());
    }
    if (open_requests() > 0) return do_read();
    deadline_.cancel();
    ws_.async_close(websocket::close_code::normal, beast::bind_front_handler(&Client::on_close, shared_from_this()));
  }

  void handle(const json::object& m) {
    const json::value* id_value = m.if_contains("id");
    const std::string id = id_value && id_value->is_string() ? std::string(id_value->as_string()) : "";
    auto it = requests_.find(id);
    const std::string type = m.contains("type") ? std::string(m.at("type").as_string()) : "";
    if (it == requests_.end()) {
      std::fprintf(stderr, "a message for no request of ours: %s\n", json::serialize(m).c_str());
      failed_ = true;
      return;
    }
    Request& r = it->second;
    if (type == "delta") return on_delta(id, r, m);
    if (type == "final") {
      r.finish = std::string(m.at("finish_reason").as_string());
      r.completion_tokens = m.at("usage").at("completion_tokens").to_number<int64_t>();
      std::printf("[%s] final: %s, %lld completion tokens, %d deltas\n", id.c_str(), r.finish.c_str(),
                  (long long)r.completion_tokens, r.deltas);
      return;
    }
    if (type == "error") return on_error(id, r, m.at("error").as_object());
    std::fprintf(stderr, "unexpected message: %s\n", json::serialize(m).c_str());
    failed_ = true;
  }

  void on_delta(const std::string& id, Request& r, const json::object& m) {
    if (id != last_delta_id_ && !last_delta_id_.empty()) ++switches_;
    last_delta_id_ = id;
    ++r.deltas;
    const std::string piece(m.at("text").as_string());
    r.text += piece;
    std::string shown = "\"" + conveyor::examples::printable(piece) + "\"";
    if (const json::value* ids = m.if_contains("token_ids")) {
      r.tokens += int(ids->as_array().size());
      if (piece.empty()) shown = json::serialize(*ids);  // no text (a model without a tokenizer): the ids
    }
    std::printf("[%s] %s\n", id.c_str(), shown.c_str());
    if (id == "long" && !r.cancel_sent && r.tokens >= options_.cancel_after) {
      r.cancel_sent = true;
      std::printf("[%s] cancel sent after %d tokens\n", id.c_str(), r.tokens);
      send(json::serialize(json::object{{"type", "cancel"}, {"id", id}}));
    }
  }

  // A model without a tokenizer cannot take text: send the text's bytes as
  // token ids instead (ids below 256 exist in every vocabulary we serve).
  void on_error(const std::string& id, Request& r, const json::object& error) {
    const std::string message(error.at("message").as_string());
    if (message.find("no tokenizer") == std::string::npos || r.retried) {
      std::printf("[%s] error: %s\n", id.c_str(), message.c_str());
      r.finish = "error";
      failed_ = true;  // the example did not show what it set out to
      return;
    }
    std::string text = r.body.contains("prompt") ? std::string(r.body.at("prompt").as_string())
                                                 : std::string(r.body.at("messages").at(0).at("content").as_string());
    json::array ids;
    for (unsigned char c : text) ids.push_back(int(c));
    r.body.erase("messages");
    r.body["prompt"] = std::move(ids);
    r.retried = true;
    std::printf("[%s] the model has no tokenizer (\"%s\"): sending the prompt as token ids\n", id.c_str(),
                message.c_str());
    send_request(id, r);
  }

  int open_requests() const {
    int open = 0;
    for (const auto& [id, r] : requests_) open += r.finish.empty();
    return open;
  }

  // ---- writing: one at a time, the rest queued ---------------------------------------

  void send(std::string message) {
    queue_.push_back(std::move(message));
    if (queue_.size() == 1) do_write();
  }

  void do_write() {
    ws_.text(true);
    ws_.async_write(net::buffer(queue_.front()), beast::bind_front_handler(&Client::on_write, shared_from_this()));
  }

  void on_write(beast::error_code ec, std::size_t) {
    if (ec) return fail(ec, "write");
    queue_.pop_front();
    if (!queue_.empty()) do_write();
  }

  void on_close(beast::error_code ec) {
    if (ec) return fail(ec, "close");
  }

  tcp::resolver resolver_;
  websocket::stream<beast::tcp_stream> ws_;
  net::steady_timer deadline_;
  beast::flat_buffer buffer_;
  std::deque<std::string> queue_;
  Options options_;
  std::map<std::string, Request> requests_;
  std::string last_delta_id_;
  int switches_ = 0;  // deltas that came for another request than the delta before
  bool failed_ = false;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"conveyor example: several requests on one WebSocket, one cancelled"};
  Options options;
  app.add_option("--host", options.host, "server address");
  app.add_option("--port", options.port, "server port");
  app.add_option("--model", options.model, "the model name to ask for (default: the one the server serves)");
  app.add_option("--api-key", options.api_key, "the server's --api-key, if it has one");
  app.add_option("--cancel-after", options.cancel_after, "tokens of the long request before it is cancelled")
      ->check(CLI::Range(1, 300));
  app.add_option("--timeout", options.timeout_seconds, "seconds to wait for everything")->check(CLI::Range(1, 3600));
  if (auto code = conveyor::cli::parse_command_line(app, argc, argv)) return *code;
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // whole lines into a pipe, in order with stderr

  net::io_context ioc;
  auto client = std::make_shared<Client>(ioc, options);
  client->run();
  ioc.run();
  if (!client->ok()) return 1;
  std::printf("%zu requests on one socket; deltas switched between requests %d times\n", client->requests().size(),
              client->interleavings());
  return 0;
}
