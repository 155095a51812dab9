#include "http/websocket_session.hpp"

#include <algorithm>
#include <utility>

#include "http/api_json.hpp"
#include "http/ws_message.hpp"
#include "http/ws_subprotocol.hpp"

namespace conveyor::http {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace websocket = boost::beast::websocket;
namespace net = boost::asio;

namespace {

// Room for final and error events past the bound, which are small and one
// per request: a client that stops reading is closed only past twice the
// bound plus this.
constexpr size_t kFinalEventSlack = 64 * 1024;

}  // namespace

WebSocketSession::WebSocketSession(net::ip::tcp::socket&& socket, std::shared_ptr<ServerState> state,
                                   uint64_t connection, ConnectionSlot slot, KeyRef key)
    : executor_(socket.get_executor()),
      ws_(std::move(socket)),
      state_(std::move(state)),
      slot_(std::move(slot)),
      connection_(connection),
      key_(std::move(key)),
      message_deadline_(executor_) {
  if (const int32_t rate = state_->options().ws_max_messages_per_second; rate > 0)
    message_rate_.emplace(double(rate), double(rate), TokenBucket::Clock::now());
}

WebSocketSession::~WebSocketSession() {
  for (auto& [serial, r] : running_) cancel(r);
  state_->remove_session(registry_id_);
}

void WebSocketSession::run(bhttp::request<bhttp::string_body> request) {
  registry_id_ = state_->add_session(weak_from_this());
  beast::get_lowest_layer(ws_).expires_never();  // the websocket stream keeps its own timeouts
  // The server's limits, as for HTTP: the handshake within header_timeout; a
  // peer silent for idle_timeout is gone (a ping goes at half of it, so a
  // client that only listens answers and stays).
  const ServerOptions& o = state_->options();
  websocket::stream_base::timeout timeouts;
  timeouts.handshake_timeout = millis(o.header_timeout_seconds);
  timeouts.idle_timeout = millis(o.idle_timeout_seconds);
  timeouts.keep_alive_pings = true;
  ws_.set_option(timeouts);
  // A browser refuses a handshake that answers none of the subprotocols it
  // offered: answer conveyor.v1 (never the key's, http/ws_subprotocol.hpp).
  const auto offered = request[bhttp::field::sec_websocket_protocol];
  const bool answer_protocol = ws_offers_protocol(std::string_view(offered.data(), offered.size()), kWsProtocol);
  ws_.set_option(websocket::stream_base::decorator([answer_protocol](websocket::response_type& res) {
    res.set(bhttp::field::server, "conveyor");
    if (answer_protocol) res.set(bhttp::field::sec_websocket_protocol, kWsProtocol);
  }));
  // Message sizes are checked in on_read, not by Beast (do_read says why).
  ws_.read_message_max(0);
  ws_.text(true);
  ws_.async_accept(request, beast::bind_front_handler(&WebSocketSession::on_accept, shared_from_this()));
}

void WebSocketSession::on_accept(beast::error_code ec) {
  if (ec) return;
  if (state_->stopping()) return shutdown();
  do_read();
}

void WebSocketSession::shutdown() {
  net::post(executor_, [self = shared_from_this()] {
    WebSocketSession& s = *self;
    if (s.closed_ || s.closing_) return;
    const ApiError why{503, "the server is shutting down", "server_error", {}, "shutting_down"};
    // Taken out first: a send() that finds the client not reading closes the
    // socket and clears the maps (cancel_all) under the loop.
    auto running = std::exchange(s.running_, {});
    s.by_client_id_.clear();
    for (auto& [serial, r] : running) {
      std::vector<std::string> out;
      r.job->abort(why, out);
      for (std::string& m : out) s.send(std::move(m));
      s.cancel(r);
      s.end_record(r, 200);
    }
    s.refuse_planning(why);
    s.closing_ = true;
    if (!s.write_in_flight_) s.do_write();
  });
}

void WebSocketSession::cancel_requests(const std::string& reason) {
  net::post(executor_, [self = shared_from_this(), reason] {
    for (auto& [serial, r] : self->running_) {
      r.job->set_cancel_reason(reason);
      self->cancel(r);  // the engine's last events end each request as usual
    }
    // Those not on the engine yet never will be.
    if (!self->closed_ && !self->closing_) self->refuse_planning({503, reason, "server_error", {}, "shutting_down"});
  });
}

void WebSocketSession::refuse_planning(const ApiError& why) {
  for (auto& [key, p] : std::exchange(planning_, {})) {  // refuse() may clear planning_ (as shutdown says)
    if (p.withdraw) p.withdraw();
    ApiRequest r;
    r.client_id = p.client_id;
    r.client_id_is_number = p.client_id_is_number;
    refuse(why, r, std::move(p.record));
  }
}

void WebSocketSession::end_record(Running& r, int status_if_ok) {
  const JobSummary summary = r.job->summary();
  r.record.set_job(summary);
  r.record.end(summary.error ? summary.error->status : status_if_ok);
}

void WebSocketSession::refuse(const ApiError& error, const ApiRequest& request, RequestRecord record) {
  if (!record.open()) record = RequestRecord(connection_, "WS", "/v1/ws");
  if (!request.client_id.empty()) record.set_id(request.client_id);
  record.set_stream(true);
  record.set_error(error.message);
  record.end(error.status);
  send(ws_error_json(error, request.client_id, request.client_id_is_number));
}

// A message is read piece by piece, at most one byte past max_body_bytes, and
// its size checked in on_read. Beast's own limit (read_message_max) would
// fail an oversized message by tearing the connection down at once, and its
// teardown (Beast 1.81) stops draining after one read: the unread rest of
// the message then makes the kernel reset the connection, which can overtake
// the 1009 close frame before the client reads it. Closing through the close
// handshake (close_for_message_size) lets the client see its 1009.
void WebSocketSession::do_read() {
  // on_read closes the socket before the buffer passes max_body_bytes.
  const size_t room = state_->options().max_body_bytes - buffer_.size() + 1;
  ws_.async_read_some(buffer_, room, beast::bind_front_handler(&WebSocketSession::on_read, shared_from_this()));
}

void WebSocketSession::on_read(beast::error_code ec, std::size_t) {
  if (ec) {  // closed by the client, reset or silent past idle_timeout: its requests end here
    if (ec == beast::error::timeout) state_->refusals().add(Refusal::idle_timeout);
    closed_ = true;
    return cancel_all();
  }
  // Closing (the message deadline passed while this read waited): the close
  // handshake reads and discards what comes.
  if (closing_) return;
  const size_t max = state_->options().max_body_bytes;
  if (buffer_.size() > max) return close_for_message_size();
  if (!ws_.is_message_done()) {
    // The frame being read told its length: a message it takes past the
    // limit is closed now, not once its bytes came (or the deadline did).
    // The hint is the frame's unread bytes when there are any, else 1.
    if (const size_t unread = ws_.read_size_hint(1); unread > 1 && unread > max - buffer_.size())
      return close_for_message_size();
    arm_message_deadline();
    return do_read();
  }
  message_deadline_armed_ = false;
  message_deadline_.cancel();
  const std::string text = beast::buffers_to_string(buffer_.data());
  buffer_.consume(buffer_.size());
  if (message_rate_ && !message_rate_->try_take(1.0, TokenBucket::Clock::now())) return close_for_message_rate();
  handle_message(text);
  if (!closing_) do_read();
}

// A message begun must end within idle_timeout, as an HTTP body must: a
// client that stalls halfway (answering pings all the while) cannot hold
// its connection, and a place under max_connections, for good. It gets a
// close frame (1008), and its socket goes at the reply or, since it may not
// be reading, at header_timeout (the closing handshake's limit).
void WebSocketSession::arm_message_deadline() {
  if (message_deadline_armed_) return;
  message_deadline_armed_ = true;
  message_deadline_.expires_after(millis(state_->options().idle_timeout_seconds));
  message_deadline_.async_wait([self = shared_from_this()](beast::error_code ec) {
    if (ec || !self->message_deadline_armed_ || self->closed_ || self->closing_) return;
    self->state_->refusals().add(Refusal::idle_timeout);
    self->buffer_.consume(self->buffer_.size());
    self->close_after_queue(websocket::close_code::policy_error);
  });
}

void WebSocketSession::close_for_message_rate() {
  state_->refusals().add(Refusal::ws_rate);
  const int32_t rate = state_->options().ws_max_messages_per_second;
  send(ws_error_json(ApiError{429,
                              "more than " + std::to_string(rate) +
                                  " messages per second on this socket (ws_max_messages_per_second): closing it",
                              "rate_limit_error", {}, "ws_rate_limit_exceeded"},
                     "", false));
  close_after_queue(websocket::close_code::policy_error);
}

// Ends the socket's requests and closes it with `code` once the queued
// output is written; nothing more is read but the client's close reply.
void WebSocketSession::close_after_queue(websocket::close_code code) {
  cancel_all();
  close_code_ = code;
  closing_ = true;
  if (!write_in_flight_) do_write();
}

// Too big a message: close 1009.
void WebSocketSession::close_for_message_size() {
  state_->refusals().add(Refusal::ws_message_size);
  buffer_.consume(buffer_.size());
  close_after_queue(websocket::close_code::too_big);
}

void WebSocketSession::handle_message(std::string_view text) {
  WsAction action = read_ws_message(text, state_->draining(), [this](const std::string& key) {
    return by_client_id_.count(key) > 0 || planning_.count(key) > 0;
  });
  if (auto* refused = std::get_if<WsRefuse>(&action)) return refuse(refused->error, refused->request);
  if (auto* cancelled = std::get_if<WsCancel>(&action)) {
    auto running = by_client_id_.find(cancelled->key);
    if (running != by_client_id_.end()) cancel(running_.at(running->second));
    if (auto planned = planning_.find(cancelled->key); planned != planning_.end()) {
      Planning p = std::move(planned->second);
      planning_.erase(planned);
      end_before_engine(p);
    }
    return;
  }
  plan(std::get<WsStart>(std::move(action)));
}

// A request cancelled before it reached the engine (planned, or its grammar
// compiling) leaves its queue and ends at once, as one the engine cancels
// before its first step ends: a final event saying cancelled, no tokens.
void WebSocketSession::end_before_engine(Planning& p) {
  if (p.withdraw) p.withdraw();
  JobSpec spec;
  spec.mode = OutputMode::websocket;
  spec.client_id = p.client_id;
  spec.client_id_is_number = p.client_id_is_number;
  spec.prompts.resize(size_t(p.prompts));
  spec.n = p.n;
  CompletionJob job(std::move(spec));
  std::vector<std::string> out;
  StreamEvent cancelled;
  cancelled.finish = FinishReason::cancelled;
  for (int32_t c = 0; c < job.num_choices(); ++c) job.on_event(c, cancelled, out);
  p.record.set_job(job.summary());
  p.record.end(200);
  for (std::string& event : out) send(std::move(event));
}

// Planned on a planning thread (ServerState::plan), so that a template, a
// long prompt or a grammar to compile stalls none of the I/O thread's
// connections; the request's id counts as running meanwhile.
void WebSocketSession::plan(WsStart start) {
  const uint64_t serial = next_serial_++;
  Planning& p = planning_[start.key];
  p.serial = serial;
  p.client_id = start.request.client_id;
  p.client_id_is_number = start.request.client_id_is_number;
  p.n = start.request.n;
  p.prompts = start.request.chat ? 1 : std::max<int32_t>(1, int32_t(start.request.prompts.size()));
  p.record = RequestRecord(connection_, "WS", "/v1/ws");
  p.record.set_id(p.client_id);
  p.record.set_stream(true);
  p.record.run_on_engine(*state_);  // in flight from here: a drain waits for it
  auto work = [start = std::make_shared<const WsStart>(std::move(start)), model = &state_->model()] {
    WsStart planned = *start;  // a copy: the work may run twice (ServerState::plan)
    std::optional<WsRefuse> refused = plan_ws_start(planned, *model);
    return std::make_pair(std::move(planned), std::move(refused));
  };
  p.withdraw = state_->plan(weak_from_this(), std::move(work),
               [serial](WebSocketSession& s, std::pair<WsStart, std::optional<WsRefuse>> planned) {
                 auto it = s.planning_.find(planned.first.key);
                 if (it == s.planning_.end() || it->second.serial != serial || s.closed_ || s.closing_) return;
                 RequestRecord record = std::move(it->second.record);
                 s.planning_.erase(it);
                 if (planned.second)
                   return s.refuse(planned.second->error, planned.second->request, std::move(record));
                 s.start(std::move(planned.first), serial, std::move(record));
               });
}

void WebSocketSession::start(WsStart start, uint64_t serial, RequestRecord record) {
  const ApiRequest& r = start.request;
  const RequestPlan& plan = start.plan;
  int64_t prompt_tokens = 0;
  for (const auto& prompt : plan.prompts) prompt_tokens += int64_t(prompt.size());
  auto admitted = state_->keys().admit(key_, prompt_tokens);
  if (auto* refused = std::get_if<KeyRefusal>(&admitted)) {
    if (refused->counted) state_->refusals().add(*refused->counted);
    return refuse(refused->error, r, std::move(record));
  }

  Running& running = running_[serial];
  running.record = std::move(record);
  running.record.set_id(r.client_id);
  running.record.set_stream(true);
  running.record.run_on_engine(*state_);
  running.lease = std::move(std::get<KeyLease>(admitted));
  running.job = std::make_unique<CompletionJob>(ws_job_spec(r, plan, state_->model()));
  by_client_id_[start.key] = serial;
  std::weak_ptr<WebSocketSession> weak = weak_from_this();
  for (int32_t p = 0; p < int32_t(plan.prompts.size()); ++p) {
    EventSink sink = [state = state_, weak, serial, first = p * plan.n](const StreamEvent& event) {
      const int32_t c = first + event.index;
      state->post_to(weak, [serial, c, event](WebSocketSession& s) { s.on_engine_event(serial, c, event); });
    };
    GenerateRequest request = plan.request_for(p);
    request.session = scoped_session(key_, request.session);  // sessions belong to their key
    request.tenant = tenant_of(key_);
    running.cancels.push_back(state_->engine().submit(std::move(request), plan.stop, plan.shown_tokens, std::move(sink)));
  }
}

void WebSocketSession::on_engine_event(uint64_t serial, int32_t choice, const StreamEvent& event) {
  auto it = running_.find(serial);
  if (it == running_.end()) return;
  Running& r = it->second;
  if (!event.token_ids.empty()) {
    r.record.on_tokens();
    r.lease.charge(int64_t(event.token_ids.size()));
  }
  if (event.refused && event.index == 0) r.lease.refund(r.job->prompt_tokens_of(choice));
  std::vector<std::string> out;
  r.job->on_event(choice, event, out);
  const bool done = r.job->done();
  for (size_t i = 0; i < out.size(); ++i) {
    const bool is_final = done && i + 1 == out.size();
    if (!is_final && r.overflowed) continue;
    send(std::move(out[i]));
    if (!is_final && queued_bytes_ > state_->options().max_output_bytes && !r.overflowed) {
      r.overflowed = true;  // the client reads too slowly: cancel, keep the final event
      state_->refusals().add(Refusal::output_size);
      cancel(r);
    }
  }
  if (done) {
    cancel(r);
    end_record(r, 200);
    const JobSpec& spec = r.job->spec();
    by_client_id_.erase(ws_id_key(spec.client_id, spec.client_id_is_number));
    running_.erase(it);
  }
}

void WebSocketSession::cancel(Running& r) {
  for (const CancelFn& c : r.cancels) c();
  r.cancels.clear();
}

void WebSocketSession::cancel_all() {
  for (auto& [serial, r] : running_) {
    cancel(r);
    end_record(r, 499);  // the socket closed under it
  }
  running_.clear();
  by_client_id_.clear();
  for (auto& [key, p] : planning_) {  // not planned or compiled for no one
    if (p.withdraw) p.withdraw();
    p.record.end(499);  // the socket closed under it
  }
  planning_.clear();
}

// ---- writing ----------------------------------------------------------------------

void WebSocketSession::send(std::string message) {
  if (closed_) return;
  if (queued_bytes_ > 2 * state_->options().max_output_bytes + kFinalEventSlack) {
    // Not even final events get through: the client has stopped reading.
    closed_ = true;
    cancel_all();
    beast::error_code ignored;
    beast::get_lowest_layer(ws_).socket().close(ignored);
    return;
  }
  queued_bytes_ += message.size();
  queue_.push_back(std::move(message));
  if (!write_in_flight_) do_write();
}

void WebSocketSession::do_write() {
  if (closed_) return;
  if (queue_.empty()) {
    if (closing_) {
      closed_ = true;
      ws_.async_close(close_code_,
                      beast::bind_front_handler(&WebSocketSession::on_close, shared_from_this()));
    }
    return;
  }
  write_in_flight_ = true;
  ws_.async_write(net::buffer(queue_.front()),
                  beast::bind_front_handler(&WebSocketSession::on_write, shared_from_this()));
}

void WebSocketSession::on_write(beast::error_code ec, std::size_t) {
  write_in_flight_ = false;
  queued_bytes_ -= std::min(queued_bytes_, queue_.front().size());
  queue_.pop_front();
  if (ec) {
    closed_ = true;
    return cancel_all();
  }
  do_write();
}

void WebSocketSession::on_close(beast::error_code) {}

}  // namespace conveyor::http
