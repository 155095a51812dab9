// The agent swarm over HTTP (examples/agent_swarm.cpp --mode http): each
// agent keeps one connection to `conveyor serve` (HTTP/1.1 keep-alive) and
// sends each turn as a streamed request, reading the server-sent events
// ("data: {...}" chunks, then "data: [DONE]") as they come. A ToolAgent
// (swarm_tools.hpp) sends its chat with the tools,
//
//   POST /v1/chat/completions {"messages": [...], "tools": [...], "tool_choice":
//     "required" | {"type": "function", "function": {"name": "calc"}} | "auto",
//     "parallel_tool_calls": false, "max_tokens": M, "stream": true,
//     "return_token_ids": true, "seed": S, "temperature": T}
//
// and joins the chunks' delta.tool_calls fragments (the first of a call
// carries its index, id and name, the next ones pieces of its arguments)
// into the message's tool_calls, as OpenAI's clients do. A TokenAgent
// (--tool-choice off) sends a completion with a token-id prompt,
//
//   POST /v1/completions {"prompt": [ids], "max_tokens": M, "stream": true,
//     "return_token_ids": true, "ignore_eos": true, "seed": S, "temperature": T}
//
// All agents run on one thread, asynchronously, in the shape of Beast's
// examples and ws_client.cpp: each step a handler that begins with
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
#include "examples/swarm_tools.hpp"

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

// A blocking request, for the set-up and /metrics: the body of a 200
// answer, or nothing (and `error` says why). A body makes it a POST of JSON.
inline std::optional<std::string> http_call(const HttpTarget& target, const std::string& path, std::string& error,
                                            const std::optional<std::string>& body = std::nullopt) {
  const std::string what = (body ? "POST " : "GET ") + path;
  try {
    net::io_context ioc;
    beast::tcp_stream stream(ioc);
    stream.expires_after(std::chrono::seconds(30));
    stream.connect(tcp::resolver(ioc).resolve(target.host, target.port));
    bhttp::request<bhttp::string_body> req{body ? bhttp::verb::post : bhttp::verb::get, path, 11};
    req.set(bhttp::field::host, target.host);
    if (!target.api_key.empty()) req.set(bhttp::field::authorization, "Bearer " + target.api_key);
    if (body) {
      req.set(bhttp::field::content_type, "application/json");
      req.body() = *body;
      req.prepare_payload();
    }
    bhttp::write(stream, req);
    beast::flat_buffer buffer;
    bhttp::response<bhttp::string_body> res;
    bhttp::read(stream, buffer, res);
    beast::error_code ignored;
    stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
    if (res.result() != bhttp::status::ok) {
      error = what + ": HTTP " + std::to_string(res.result_int()) + ": " + res.body();
      return std::nullopt;
    }
    return std::move(res.body());
  } catch (const std::exception& e) {  // Beast's blocking calls throw; this is the edge
    error = what + ": " + e.what();
    return std::nullopt;
  }
}

inline std::optional<std::string> http_get(const HttpTarget& target, const std::string& path, std::string& error) {
  return http_call(target, path, error);
}

// The server's count of the prompt `messages` make with the tools
// (POST /v1/chat/completions/render), for fit_system_prompt.
inline PromptCounter server_prompt_counter(const HttpTarget& target) {
  return [&target](const json::array& messages, std::string& error) -> std::optional<int> {
    json::object body{{"messages", messages}, {"tools", tools()}};
    if (!target.model.empty()) body["model"] = target.model;
    const std::optional<std::string> answer =
        http_call(target, "/v1/chat/completions/render", error, json::serialize(body));
    if (!answer) return std::nullopt;
    json::error_code ec;
    const json::value v = json::parse(*answer, ec);
    const json::value* count = !ec && v.is_object() ? v.as_object().if_contains("count") : nullptr;
    if (!count || !count->is_number()) {
      error = "POST /v1/chat/completions/render: no count in " + *answer;
      return std::nullopt;
    }
    return int(count->to_number<int64_t>());
  };
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

// One agent's connection and its turns over it: a ToolAgent's chats, or a
// TokenAgent's completions.
class HttpAgent : public std::enable_shared_from_this<HttpAgent> {
 public:
  HttpAgent(net::io_context& ioc, tcp::resolver::results_type endpoints, const HttpTarget& target,
            TurnSettings settings, Agent& agent, Counters& counters, std::function<void()> on_done)
      : stream_(ioc), endpoints_(std::move(endpoints)), target_(target), settings_(settings), agent_(agent),
        tools_(dynamic_cast<ToolAgent*>(&agent)), counters_(counters), on_done_(std::move(on_done)) {}

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
    json::object body{{"max_tokens", settings_.max_tokens},
                      {"temperature", settings_.temperature},
                      {"seed", 1000 * agent_.index() + agent_.turns_done()},
                      {"stream", true},
                      {"return_token_ids", true}};
    if (tools_) {  // the call ends at EOS
      body["messages"] = tools_->messages();
      body["tools"] = tools();
      body["tool_choice"] = tools_->choice().tool_choice();
      body["parallel_tool_calls"] = false;
    } else {
      json::array prompt;
      for (int32_t id : static_cast<TokenAgent&>(agent_).conversation()) prompt.push_back(id);
      body["prompt"] = std::move(prompt);
      body["ignore_eos"] = true;  // every turn makes max_tokens, so runs compare
    }
    if (!target_.model.empty()) body["model"] = target_.model;
    if (settings_.sessions) body["session_id"] = "agent-" + std::to_string(agent_.index());
    req_ = {bhttp::verb::post, tools_ ? "/v1/chat/completions" : "/v1/completions", 11};
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
    if (const json::value* delta = choice.if_contains("delta"); delta && delta->is_object()) {
      if (!read_delta(delta->as_object())) {
        fail_turn("a tool_calls fragment without an index: " + std::string(event));
        return false;
      }
    }
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

  // A chat chunk's delta: content, and fragments of tool calls joined by
  // their index. False when a fragment has no index.
  bool read_delta(const json::object& delta) {
    if (const json::value* content = delta.if_contains("content"); content && content->is_string())
      turn_.text += std::string(content->as_string());
    const json::value* calls = delta.if_contains("tool_calls");
    if (!calls || !calls->is_array()) return true;
    for (const json::value& fragment : calls->as_array()) {
      const json::object* f = fragment.if_object();
      const json::value* at = f ? f->if_contains("index") : nullptr;
      if (!at || !at->is_int64() || at->as_int64() < 0 || at->as_int64() > 64) return false;
      const size_t index = size_t(at->as_int64());
      if (turn_.calls.size() <= index) turn_.calls.resize(index + 1);
      Call& call = turn_.calls[index];
      if (const json::value* id = f->if_contains("id"); id && id->is_string()) call.id = id->as_string();
      const json::value* function = f->if_contains("function");
      if (!function || !function->is_object()) continue;
      if (const json::value* name = function->as_object().if_contains("name"); name && name->is_string())
        call.name = name->as_string();
      if (const json::value* args = function->as_object().if_contains("arguments"); args && args->is_string())
        call.arguments += args->as_string();
    }
    return true;
  }

  void end_turn() {
    if (turn_.finish != "length" && turn_.finish != "stop" && turn_.finish != "tool_calls")
      return fail_turn("the turn ended with finish_reason \"" + turn_.finish + "\"");
    turn_.record.e2e = seconds_between(turn_.sent, Clock::now());
    turn_.record.tokens = int(turn_.ids.size());
    if (tools_) tools_->finish_turn(turn_.record, turn_.calls, turn_.text);
    else static_cast<TokenAgent&>(agent_).finish_turn(turn_.record, turn_.text, turn_.ids);
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
    std::string text;         // completions' text, or the chat's content
    std::vector<Call> calls;  // the chat's tool calls, joined from the deltas
    std::vector<int32_t> ids;
    std::string finish;  // the last finish_reason seen
    bool done = false;   // data: [DONE] came
  };

  beast::tcp_stream stream_;
  tcp::resolver::results_type endpoints_;
  const HttpTarget& target_;
  TurnSettings settings_;
  Agent& agent_;
  ToolAgent* tools_;  // the agent, when it calls tools
  Counters& counters_;
  std::function<void()> on_done_;
  beast::flat_buffer buffer_;
  bhttp::request<bhttp::string_body> req_;
  std::optional<bhttp::response_parser<bhttp::string_body>> parser_;
  Turn turn_;
  bool finished_ = false;
};

}  // namespace conveyor::examples::swarm
