// The agent swarm over HTTP (examples/agent_swarm.cpp --mode http): each
// agent keeps one connection to `conveyor serve` (HTTP/1.1 keep-alive) and
// sends each turn as a streamed completion with a token-id prompt,
//
//   POST /v1/completions {"prompt": [ids], "max_tokens": M, "stream": true,
//     "return_token_ids": true, "ignore_eos": true, "seed": S, "temperature": T}
//
// reading the server-sent events ("data: {...}" chunks, then "data: [DONE]")
// as they come. All agents run on one thread, asynchronously, in the shape of
// Beast's examples and ws_client.cpp: each step a handler that begins with
// `if (ec) return fail(ec, "what")`.
#pragma once

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/json.hpp>
#include <functional>
#include <optional>
#include <string>

#include "examples/swarm_agent.hpp"

namespace conveyor::examples::swarm {

namespace beast = boost::beast;
namespace bhttp = beast::http;
namespace net = boost::asio;
namespace json = boost::json;
using tcp = net::ip::tcp;

// Where the server is and what every request carries.
struct HttpTarget {
  std::string host = "127.0.0.1";
  std::string port = "8000";
  std::string model;    // the "model" field; empty: left out (the served model)
  std::string api_key;  // "Authorization: Bearer KEY" when not empty
  std::chrono::seconds timeout{600};

  // From "http://HOST:PORT" (a path after it is ignored); false if malformed.
  bool parse_url(std::string_view url) {
    if (url.starts_with("http://")) url.remove_prefix(7);
    url = url.substr(0, url.find('/'));
    const size_t colon = url.rfind(':');
    if (url.empty() || colon == std::string_view::npos || colon + 1 == url.size()) return false;
    host = std::string(url.substr(0, colon));
    port = std::string(url.substr(colon + 1));
    return port.find_first_not_of("0123456789") == std::string::npos;
  }
};

// A blocking GET, for the set-up and /metrics: the body of a 200 answer, or
// nothing (and `error` says why).
inline std::optional<std::string> http_get(const HttpTarget& target, const std::string& path, std::string& error) {
  try {
    net::io_context ioc;
    beast::tcp_stream stream(ioc);
    stream.expires_after(std::chrono::seconds(30));
    stream.connect(tcp::resolver(ioc).resolve(target.host, target.port));
    bhttp::request<bhttp::empty_body> req{bhttp::verb::get, path, 11};
    req.set(bhttp::field::host, target.host);
    if (!target.api_key.empty()) req.set(bhttp::field::authorization, "Bearer " + target.api_key);
    bhttp::write(stream, req);
    beast::flat_buffer buffer;
    bhttp::response<bhttp::string_body> res;
    bhttp::read(stream, buffer, res);
    beast::error_code ignored;
    stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
    if (res.result() != bhttp::status::ok) {
      error = "GET " + path + ": HTTP " + std::to_string(res.result_int()) + ": " + res.body();
      return std::nullopt;
    }
    return std::move(res.body());
  } catch (const std::exception& e) {  // Beast's blocking calls throw; this is the edge
    error = "GET " + path + ": " + e.what();
    return std::nullopt;
  }
}

// The value of an unlabelled counter in Prometheus text ("NAME VALUE" lines); -1 if absent.
inline double metric_value(const std::string& text, const std::string& name) {
  for (size_t at = text.find(name + " "); at != std::string::npos; at = text.find(name + " ", at + 1)) {
    if (at == 0 || text[at - 1] == '\n') return std::strtod(text.c_str() + at + name.size() + 1, nullptr);
  }
  return -1;
}

// How every turn samples.
struct TurnSettings {
  int max_tokens = 16;
  double temperature = 1.0;
  bool sessions = false;  // each agent's turns name its session ("session_id")
};

// One agent's connection and its turns over it.
class HttpAgent : public std::enable_shared_from_this<HttpAgent> {
 public:
  HttpAgent(net::io_context& ioc, tcp::resolver::results_type endpoints, const HttpTarget& target,
            TurnSettings settings, Agent& agent, Counters& counters, std::function<void()> on_done)
      : stream_(ioc), endpoints_(std::move(endpoints)), target_(target), settings_(settings), agent_(agent),
        counters_(counters), on_done_(std::move(on_done)) {}

  void start() { connect(); }

 private:
  void connect() {
    stream_.expires_after(target_.timeout);
    stream_.async_connect(endpoints_, beast::bind_front_handler(&HttpAgent::on_connect, shared_from_this()));
  }

  void on_connect(beast::error_code ec, tcp::endpoint) {
    if (ec) return fail(ec, "connect");
    send_turn();
  }

  void send_turn() {
    json::array prompt;
    for (int32_t id : agent_.conversation()) prompt.push_back(id);
    json::object body{{"prompt", std::move(prompt)},
                      {"max_tokens", settings_.max_tokens},
                      {"temperature", settings_.temperature},
                      {"seed", 1000 * agent_.index() + agent_.turns_done()},
                      {"ignore_eos", true},
                      {"stream", true},
                      {"return_token_ids", true}};
    if (!target_.model.empty()) body["model"] = target_.model;
    if (settings_.sessions) body["session_id"] = "agent-" + std::to_string(agent_.index());
    req_ = {bhttp::verb::post, "/v1/completions", 11};
    req_.set(bhttp::field::host, target_.host);
    req_.set(bhttp::field::content_type, "application/json");
    if (!target_.api_key.empty()) req_.set(bhttp::field::authorization, "Bearer " + target_.api_key);
    req_.keep_alive(true);
    req_.body() = json::serialize(body);
    req_.prepare_payload();
    turn_ = Turn{};
    turn_.sent = Clock::now();
    stream_.expires_after(target_.timeout);
    bhttp::async_write(stream_, req_, beast::bind_front_handler(&HttpAgent::on_write, shared_from_this()));
  }

  void on_write(beast::error_code ec, std::size_t) {
    if (ec) return fail(ec, "write");
    parser_.emplace();
    parser_->body_limit(boost::none);
    bhttp::async_read_header(stream_, buffer_, *parser_,
                             beast::bind_front_handler(&HttpAgent::on_header, shared_from_this()));
  }

  void on_header(beast::error_code ec, std::size_t) {
    if (ec) return fail(ec, "read header");
    if (parser_->get().result() != bhttp::status::ok) {  // an error body: read it whole, then fail
      bhttp::async_read(stream_, buffer_, *parser_, [self = shared_from_this()](beast::error_code ec, std::size_t) {
        self->fail_turn("HTTP " + std::to_string(self->parser_->get().result_int()) + ": " +
                        (ec ? ec.message() : self->parser_->get().body()));
      });
      return;
    }
    read_some();
  }

  void read_some() {
    bhttp::async_read_some(stream_, buffer_, *parser_,
                           beast::bind_front_handler(&HttpAgent::on_read, shared_from_this()));
  }

  // Takes the complete events out of the body read so far (the parser
  // appends to what is left of it).
  void on_read(beast::error_code ec, std::size_t) {
    if (ec) return fail(ec, "read");
    std::string& body = parser_->get().body();
    size_t begin = 0;
    for (size_t end; (end = body.find("\n\n", begin)) != std::string::npos; begin = end + 2) {
      if (!on_event(std::string_view(body).substr(begin, end - begin))) return;
    }
    body.erase(0, begin);
    if (!parser_->is_done()) return read_some();
    if (!turn_.done) return fail_turn("the stream ended without data: [DONE]");
    end_turn();
  }

  // One server-sent event; false when the turn failed.
  bool on_event(std::string_view event) {
    if (!event.starts_with("data: ")) return true;  // comments and other fields
    event.remove_prefix(6);
    if (event == "[DONE]") {
      turn_.done = true;
      return true;
    }
    json::error_code jec;
    const json::value v = json::parse(event, jec);
    if (jec || !v.is_object()) {
      fail_turn("an event that is not a JSON object: " + std::string(event));
      return false;
    }
    if (const json::value* error = v.as_object().if_contains("error")) {
      fail_turn("error event: " + json::serialize(*error));
      return false;
    }
    const json::value* choices = v.as_object().if_contains("choices");
    if (!choices || !choices->is_array() || choices->as_array().empty()) return true;  // a usage chunk
    const json::object& choice = choices->as_array().at(0).as_object();
    if (const json::value* text = choice.if_contains("text"); text && text->is_string())
      turn_.text += std::string(text->as_string());
    if (const json::value* ids = choice.if_contains("token_ids"); ids && ids->is_array()) {
      for (const json::value& id : ids->as_array()) turn_.ids.push_back(int32_t(id.to_number<int64_t>()));
      if (!ids->as_array().empty() && turn_.record.ttft < 0)
        turn_.record.ttft = seconds_between(turn_.sent, Clock::now());
      counters_.tokens += int64_t(ids->as_array().size());
    }
    if (const json::value* finish = choice.if_contains("finish_reason"); finish && finish->is_string())
      turn_.finish = std::string(finish->as_string());
    return true;
  }

  void end_turn() {
    if (turn_.finish != "length" && turn_.finish != "stop")
      return fail_turn("the turn ended with finish_reason \"" + turn_.finish + "\"");
    turn_.record.e2e = seconds_between(turn_.sent, Clock::now());
    turn_.record.tokens = int(turn_.ids.size());
    agent_.finish_turn(turn_.record, turn_.text, turn_.ids);
    ++counters_.turns;
    if (agent_.done()) {
      ++counters_.agents_done;
      return finish();
    }
    if (parser_->keep_alive()) return send_turn();
    beast::error_code ignored;
    stream_.socket().close(ignored);  // the server closes this one: open another
    connect();
  }

  void fail(beast::error_code ec, const char* what) { fail_turn(std::string(what) + ": " + ec.message()); }

  void fail_turn(std::string why) {
    if (finished_) return;
    agent_.fail(std::move(why));
    ++counters_.agents_failed;
    finish();
  }

  void finish() {
    finished_ = true;
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.close();
    on_done_();
  }

  struct Turn {
    Clock::time_point sent;
    TurnRecord record;
    std::string text;
    std::vector<int32_t> ids;
    std::string finish;  // the last finish_reason seen
    bool done = false;   // data: [DONE] came
  };

  beast::tcp_stream stream_;
  tcp::resolver::results_type endpoints_;
  const HttpTarget& target_;
  TurnSettings settings_;
  Agent& agent_;
  Counters& counters_;
  std::function<void()> on_done_;
  beast::flat_buffer buffer_;
  bhttp::request<bhttp::string_body> req_;
  std::optional<bhttp::response_parser<bhttp::string_body>> parser_;
  Turn turn_;
  bool finished_ = false;
};

}  // namespace conveyor::examples::swarm
