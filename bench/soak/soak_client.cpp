#include "bench/soak/soak_client.hpp"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <boost/json.hpp>
#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <optional>

#include "http/sse_client.hpp"

namespace conveyor::soak {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = beast::http;
namespace websocket = beast::websocket;
namespace json = boost::json;
using tcp = asio::ip::tcp;

std::chrono::milliseconds millis(double seconds) { return std::chrono::milliseconds(int64_t(seconds * 1000)); }

// A request is lost for this reason: "timeout" and the like, short, so
// that they group into kinds.
std::string io_error_kind(const char* what, beast::error_code ec) {
  if (ec == beast::error::timeout) return std::string(what) + ": timeout";
  return std::string(what) + ": " + ec.message();
}

StreamOutcome abandoned(int32_t events, bool collateral = false) {
  return StreamOutcome{StreamEnd::abandoned, events, collateral, {}};
}
StreamOutcome lost(int32_t events, std::string why) { return StreamOutcome{StreamEnd::lost, events, false, std::move(why)}; }
StreamOutcome completed(int32_t events) { return StreamOutcome{StreamEnd::completed, events, false, {}}; }

bool normal_finish(std::string_view reason) { return reason == "stop" || reason == "length"; }

class WsConn;

// Hands out plans while fewer than `concurrency` streams run, and collects
// their outcomes. Touched only from the io_context's thread.
class Runner {
 public:
  Runner(const std::vector<StreamPlan>& plans, const ClientOptions& options)
      : plans_(plans), options_(options), outcomes_(plans.size()), ended_(plans.size(), false),
        endpoint_(asio::ip::make_address("127.0.0.1"), options.port) {}

  std::vector<StreamOutcome> run();

  asio::io_context& ioc() { return ioc_; }
  const ClientOptions& options() const { return options_; }
  const tcp::endpoint& endpoint() const { return endpoint_; }
  const StreamPlan& plan(size_t index) const { return plans_[index]; }
  bool ws_plans_left() const;
  void end(size_t index, StreamOutcome outcome);

 private:
  void pump();
  std::shared_ptr<WsConn> socket_with_room();

  asio::io_context ioc_;
  const std::vector<StreamPlan>& plans_;
  ClientOptions options_;
  std::vector<StreamOutcome> outcomes_;
  std::vector<bool> ended_;
  tcp::endpoint endpoint_;
  size_t next_ = 0;
  int64_t ws_left_ = 0;  // WebSocket plans not yet started
  int32_t in_flight_ = 0;
  bool pump_posted_ = false;
  std::vector<std::shared_ptr<WsConn>> sockets_;
};

// ---- SSE: one connection per stream ---------------------------------------------------

class SseCall : public std::enable_shared_from_this<SseCall> {
 public:
  SseCall(Runner& runner, size_t index)
      : runner_(runner), index_(index), plan_(runner.plan(index)), stream_(runner.ioc()) {}

  void start() {
    arm();
    stream_.async_connect(runner_.endpoint(), [self = shared_from_this()](beast::error_code ec) {
      if (ec) return self->end(lost(0, io_error_kind("connect", ec)));
      self->write();
    });
  }

 private:
  void arm() { stream_.expires_after(millis(runner_.options().timeout_s)); }

  void write() {
    const bool chat = plan_.transport == Transport::sse_chat;
    request_ = {bhttp::verb::post, chat ? "/v1/chat/completions" : "/v1/completions", 11};
    request_.set(bhttp::field::host, "127.0.0.1");
    request_.set(bhttp::field::content_type, "application/json");
    request_.body() = plan_.body;
    request_.prepare_payload();
    arm();
    bhttp::async_write(stream_, request_, [self = shared_from_this()](beast::error_code ec, size_t) {
      if (ec) return self->end(lost(0, io_error_kind("write", ec)));
      if (self->plan_.abandon != Abandon::none && self->plan_.before_response) return self->leave();
      self->read_header();
    });
  }

  void read_header() {
    parser_.body_limit(boost::none);
    parser_.on_chunk_body(on_chunk_);
    arm();
    bhttp::async_read_header(stream_, buffer_, parser_, [self = shared_from_this()](beast::error_code ec, size_t) {
      if (ec) return self->end(lost(0, io_error_kind("read header", ec)));
      const int status = int(self->parser_.get().result_int());
      if (status != 200) return self->end(lost(0, "http " + std::to_string(status)));
      if (self->plan_.abandon != Abandon::none && self->plan_.after_events == 0) return self->leave();
      self->read_body();
    });
  }

  void read_body() {
    arm();
    bhttp::async_read(stream_, buffer_, parser_, [self = shared_from_this()](beast::error_code ec, size_t) {
      self->on_body(ec);
    });
  }

  void on_body(beast::error_code ec) {
    if (ec && ec != bhttp::error::end_of_chunk) return end(lost(events_, io_error_kind("read", ec)));
    for (std::string& data : decoder_.feed(pending_)) {
      if (!take_event(data)) return;
    }
    pending_.clear();
    if (!parser_.is_done()) return read_body();
    if (!done_) return end(lost(events_, "stream ended without [DONE]"));
    if (finishes_ == 0) return end(lost(events_, "[DONE] without a finish_reason"));
    end(completed(events_));
  }

  // False when the stream has ended (abandoned here, or lost).
  bool take_event(const std::string& data) {
    if (data == "[DONE]") {
      done_ = true;
      return true;
    }
    if (done_) return end_lost("event after [DONE]");
    ++events_;
    json::error_code jec;
    const json::value v = json::parse(data, jec);
    const json::object* chunk = jec ? nullptr : v.if_object();
    if (!chunk) return end_lost("chunk is not JSON");
    if (chunk->contains("error")) return end_lost("sse error event");
    if (const auto* choices = chunk->if_contains("choices"); choices && choices->is_array()) {
      for (const json::value& c : choices->get_array()) {
        const json::value* reason = c.is_object() ? c.get_object().if_contains("finish_reason") : nullptr;
        if (!reason || !reason->is_string()) continue;
        if (!normal_finish(reason->get_string())) return end_lost("finish_reason " + std::string(reason->get_string()));
        ++finishes_;
      }
    }
    if (plan_.abandon != Abandon::none && events_ >= plan_.after_events) {
      leave();
      return false;
    }
    return true;
  }

  bool end_lost(std::string why) {
    end(lost(events_, std::move(why)));
    return false;
  }

  // The client goes away: the connection closes under the request.
  void leave() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.socket().close(ignored);
    end(abandoned(events_));
  }

  void end(StreamOutcome outcome) {
    if (ended_) return;
    ended_ = true;
    beast::error_code ignored;
    stream_.socket().close(ignored);  // after the end too: the client closes its connection
    runner_.end(index_, std::move(outcome));
  }

  Runner& runner_;
  const size_t index_;
  const StreamPlan& plan_;
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  bhttp::request<bhttp::string_body> request_;
  bhttp::response_parser<bhttp::empty_body> parser_;
  std::string pending_;  // chunk bytes read but not yet split into events
  std::function<size_t(uint64_t, std::string_view, beast::error_code&)> on_chunk_ =
      [this](uint64_t remain, std::string_view data, beast::error_code& ec) {
        if (remain == data.size()) ec = bhttp::error::end_of_chunk;  // hand each chunk back
        pending_.append(data);
        return data.size();
      };
  SseDecoder decoder_;
  int32_t events_ = 0;
  int32_t finishes_ = 0;
  bool done_ = false;
  bool ended_ = false;
};

// ---- WebSocket: several streams per socket --------------------------------------------

class WsConn : public std::enable_shared_from_this<WsConn> {
 public:
  explicit WsConn(Runner& runner) : runner_(runner), ws_(runner.ioc()), watchdog_(runner.ioc()) {}

  void start() {
    beast::get_lowest_layer(ws_).expires_after(millis(runner_.options().timeout_s));
    beast::get_lowest_layer(ws_).async_connect(runner_.endpoint(), [self = shared_from_this()](beast::error_code ec) {
      if (ec) return self->fail(io_error_kind("ws connect", ec));
      self->ws_.async_handshake("127.0.0.1", "/v1/ws", [self](beast::error_code ec) {
        if (ec) return self->fail(io_error_kind("ws handshake", ec));
        beast::get_lowest_layer(self->ws_).expires_never();  // the watchdog times requests instead
        self->open_ = true;
        self->read();
        self->do_write();
      });
    });
  }

  bool accepting() const { return !closing_; }
  size_t in_flight() const { return requests_.size(); }

  void add(size_t index) {
    const StreamPlan& plan = runner_.plan(index);
    const int64_t id = next_id_++;
    requests_[id] = Request{index, &plan};
    // Abandoning before any answer: a cancel goes right behind the request;
    // a close once the request is on the wire.
    const bool at_once = plan.abandon != Abandon::none && plan.after_events == 0;
    send("{\"id\":" + std::to_string(id) + "," + plan.body.substr(1),
         at_once && plan.abandon != Abandon::cancel ? id : 0);
    if (at_once && plan.abandon == Abandon::cancel) abandon(id);
    rearm();
  }

  // No more requests will come: close once the last one ends.
  void retire() {
    if (requests_.empty()) close(Abandon::close);
  }

 private:
  struct Request {
    size_t index = 0;
    const StreamPlan* plan = nullptr;
    int32_t events = 0;
    bool cancel_sent = false;
  };

  void rearm() {
    watchdog_.expires_after(millis(runner_.options().timeout_s));
    watchdog_.async_wait([weak = weak_from_this()](beast::error_code ec) {
      auto self = weak.lock();
      if (ec || !self || self->requests_.empty() || self->closing_) return;
      self->fail("ws: timeout");
    });
  }

  // `then_abandon`: the request to abandon once this message is written (0: none).
  void send(std::string text, int64_t then_abandon = 0) {
    queue_.push_back(Outgoing{std::move(text), then_abandon});
    if (open_ && !writing_) do_write();
  }

  void do_write() {
    if (writing_ || queue_.empty() || closing_) return;
    writing_ = true;
    ws_.text(true);
    ws_.async_write(asio::buffer(queue_.front().text), [self = shared_from_this()](beast::error_code ec, size_t) {
      self->writing_ = false;
      const int64_t then_abandon = self->queue_.front().then_abandon;
      self->queue_.pop_front();
      if (self->close_after_write_) return self->close(*self->close_after_write_);
      if (ec) return self->fail(io_error_kind("ws write", ec));
      if (then_abandon != 0 && self->requests_.count(then_abandon)) return self->abandon(then_abandon);
      self->do_write();
    });
  }

  void read() {
    ws_.async_read(buffer_, [self = shared_from_this()](beast::error_code ec, size_t) {
      if (self->closing_) return;
      if (ec) return self->fail(io_error_kind("ws read", ec));
      const std::string text = beast::buffers_to_string(self->buffer_.data());
      self->buffer_.consume(self->buffer_.size());
      self->on_message(text);
      if (!self->closing_) self->read();
    });
  }

  void on_message(const std::string& text) {
    json::error_code jec;
    const json::value v = json::parse(text, jec);
    const json::object* m = jec ? nullptr : v.if_object();
    const json::value* id = m ? m->if_contains("id") : nullptr;
    auto it = id && id->is_int64() ? requests_.find(id->get_int64()) : requests_.end();
    if (it == requests_.end()) {
      // Every event names one of our requests; anything else is a protocol
      // error that takes the socket's requests with it.
      return fail("ws: unexpected message");
    }
    rearm();
    Request& r = it->second;
    const json::value* type = m->if_contains("type");
    const std::string_view kind = type && type->is_string() ? std::string_view(type->get_string()) : "";
    if (kind == "delta") {
      ++r.events;
      if (r.plan->abandon != Abandon::none && !r.cancel_sent && r.events == r.plan->after_events) abandon(it->first);
      return;
    }
    if (kind == "final") {
      const json::value* reason = m->if_contains("finish_reason");
      const std::string_view why = reason && reason->is_string() ? std::string_view(reason->get_string()) : "";
      if (why == "error") return finish(it, lost(r.events, "ws final error"));
      if (r.cancel_sent) return finish(it, abandoned(r.events));
      if (normal_finish(why)) return finish(it, completed(r.events));
      return finish(it, lost(r.events, "ws final " + std::string(why)));
    }
    std::string code = "?";
    if (const auto* e = m->if_contains("error"); e && e->is_object())
      if (const auto* c = e->get_object().if_contains("code"); c && c->is_string()) code = c->get_string();
    finish(it, lost(r.events, "ws error event " + code));
  }

  void abandon(int64_t id) {
    Request& r = requests_.at(id);
    const Abandon how = r.plan->abandon;
    if (how == Abandon::cancel) {
      r.cancel_sent = true;
      return send("{\"type\":\"cancel\",\"id\":" + std::to_string(id) + "}");
    }
    // Closing the socket abandons its other requests too.
    const size_t index = r.index;
    const int32_t events = r.events;
    requests_.erase(id);
    for (auto& [other, o] : requests_) runner_.end(o.index, abandoned(o.events, /*collateral=*/true));
    requests_.clear();
    runner_.end(index, abandoned(events));
    close(how);
  }

  void finish(std::map<int64_t, Request>::iterator it, StreamOutcome outcome) {
    const size_t index = it->second.index;
    requests_.erase(it);
    runner_.end(index, std::move(outcome));
    if (requests_.empty() && !runner_.ws_plans_left()) close(Abandon::close);
  }

  // Every request still here is lost, and the socket is dropped.
  void fail(const std::string& why) {
    auto requests = std::move(requests_);
    requests_.clear();
    for (auto& [id, r] : requests) runner_.end(r.index, lost(r.events, why));
    close(Abandon::drop);
  }

  // Abandon::close: a clean close (after the write in flight, if any);
  // Abandon::drop: the TCP connection closed at once.
  void close(Abandon how) {
    if (closing_ && !close_after_write_) return;
    closing_ = true;
    queue_.resize(writing_ ? 1 : 0);  // the message being written stays until its write ends
    watchdog_.cancel();
    beast::error_code ignored;
    if (how == Abandon::drop || !open_) {
      beast::get_lowest_layer(ws_).socket().close(ignored);
      return;
    }
    if (writing_) {
      close_after_write_ = how;  // one write at a time: the close frame waits for it
      return;
    }
    close_after_write_.reset();
    beast::get_lowest_layer(ws_).expires_after(millis(runner_.options().timeout_s));
    ws_.async_close(websocket::close_code::normal, [self = shared_from_this()](beast::error_code) {
      beast::error_code ignored;
      beast::get_lowest_layer(self->ws_).socket().close(ignored);
    });
  }

  Runner& runner_;
  websocket::stream<beast::tcp_stream> ws_;
  asio::steady_timer watchdog_;  // no message for timeout_s while requests run: they are lost
  beast::flat_buffer buffer_;
  struct Outgoing {
    std::string text;
    int64_t then_abandon = 0;
  };
  std::deque<Outgoing> queue_;
  std::map<int64_t, Request> requests_;
  int64_t next_id_ = 1;
  bool open_ = false;
  bool writing_ = false;
  bool closing_ = false;
  std::optional<Abandon> close_after_write_;
};

std::vector<StreamOutcome> Runner::run() {
  for (const StreamPlan& p : plans_) ws_left_ += p.transport == Transport::ws;
  pump();
  ioc_.run();
  for (size_t i = 0; i < outcomes_.size(); ++i)
    if (!ended_[i]) outcomes_[i] = lost(0, "client: never ended");  // a bug of this client
  return std::move(outcomes_);
}

bool Runner::ws_plans_left() const { return ws_left_ > 0; }

void Runner::end(size_t index, StreamOutcome outcome) {
  if (ended_[index]) return;
  ended_[index] = true;
  outcomes_[index] = std::move(outcome);
  --in_flight_;
  if (pump_posted_) return;
  pump_posted_ = true;
  asio::post(ioc_, [this] {
    pump_posted_ = false;
    pump();
  });
}

std::shared_ptr<WsConn> Runner::socket_with_room() {
  std::erase_if(sockets_, [](const auto& s) { return !s->accepting(); });
  std::shared_ptr<WsConn> best;
  for (const auto& s : sockets_)
    if (s->in_flight() < size_t(options_.ws_per_socket) && (!best || s->in_flight() > best->in_flight())) best = s;
  if (best) return best;
  auto fresh = std::make_shared<WsConn>(*this);
  sockets_.push_back(fresh);
  fresh->start();
  return fresh;
}

void Runner::pump() {
  while (in_flight_ < options_.concurrency && next_ < plans_.size()) {
    const size_t index = next_++;
    ++in_flight_;
    if (plans_[index].transport == Transport::ws) {
      --ws_left_;
      socket_with_room()->add(index);
    } else {
      std::make_shared<SseCall>(*this, index)->start();
    }
  }
  if (!ws_plans_left()) {
    for (const auto& s : sockets_)
      if (s->accepting()) s->retire();
  }
}

}  // namespace

std::vector<StreamOutcome> run_streams(const std::vector<StreamPlan>& plans, const ClientOptions& options) {
  Runner runner(plans, options);
  return runner.run();
}

std::string http_get(uint16_t port, const std::string& target, double timeout_s) {
  asio::io_context ioc;
  beast::tcp_stream stream(ioc);
  stream.expires_after(millis(timeout_s));
  beast::flat_buffer buffer;
  bhttp::request<bhttp::empty_body> req{bhttp::verb::get, target, 11};
  req.set(bhttp::field::host, "127.0.0.1");
  bhttp::response<bhttp::string_body> res;
  std::string body;
  stream.async_connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port), [&](beast::error_code ec) {
    if (ec) return;
    bhttp::async_write(stream, req, [&](beast::error_code ec, size_t) {
      if (ec) return;
      bhttp::async_read(stream, buffer, res, [&](beast::error_code ec, size_t) {
        if (!ec && res.result_int() == 200) body = res.body();
      });
    });
  });
  ioc.run();
  return body;
}

}  // namespace conveyor::soak
