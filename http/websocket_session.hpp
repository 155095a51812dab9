// One WebSocket connection on /v1/ws: many requests in flight at once.
//
// Client -> server, one JSON text message each:
//   {"id": ID, "prompt": ... | "messages": [...], <the HTTP endpoints' fields>}
//   {"type": "cancel", "id": ID}
// Server -> client:
//   {"type": "delta", "id": ID, "index": i, "text": "...", ...}   as text is produced
//   {"type": "final", "id": ID, "finish_reason": "stop"|"length"|"cancelled"|"error",
//    "usage": {...}, ["error": {...}], ["choices": [...] when n > 1]}   once per request
//   {"type": "error", "id": ID|null, "error": {...}}   a message that could not be run
//       (malformed JSON, bad fields, a duplicate id); the socket and the other
//       requests carry on
// Closing the socket cancels all of its requests; a cancel for an id that is
// not running (already finished) is ignored. A request cancelled before it
// reached the engine (planned, or its grammar waiting to compile) ends at
// once, its final event saying cancelled with zero usage.
//
// While the server drains, new requests get an error event (code
// "shutting_down"); cancels still work. Every request, run or refused, gets
// a line in the access log (method "WS").
//
// Backpressure: output queued but not sent is bounded by max_output_bytes;
// a delta that would pass it cancels its request (whose final event then
// says `cancelled`); past twice the bound (plus 64 KiB for final events)
// the socket is closed.
//
// Limits: the handshake must end within header_timeout_seconds; a client
// silent for idle_timeout_seconds is closed (pings go at half of it, which a
// listening client answers), and so is one whose message, once begun, has
// not ended within idle_timeout_seconds. A message larger than max_body_bytes closes the socket with code
// 1009 (message too big; Beast sends it) and cancels its requests. More than
// ws_max_messages_per_second messages (cancels too; a burst of that many
// is allowed) get an error event (code "ws_rate_limit_exceeded"), then the
// socket is closed with code 1008 (policy violation) and its requests are
// cancelled. Each request passes the API key the upgrade carried through
// its limits (http/key_gate.hpp): a refusal is an error event for that
// request (type rate_limit_error), and the socket carries on.
#pragma once

#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>

#include "http/completion_job.hpp"
#include "http/request_record.hpp"
#include "http/server_state.hpp"
#include "http/token_bucket.hpp"
#include "http/ws_message.hpp"

namespace conveyor::http {

class WebSocketSession : public SessionBase, public std::enable_shared_from_this<WebSocketSession> {
 public:
  // `connection`: the number the access log gives the TCP connection;
  // `slot`: its place under max_connections; `key`: the upgrade's API key.
  WebSocketSession(boost::asio::ip::tcp::socket&& socket, std::shared_ptr<ServerState> state, uint64_t connection,
                   ConnectionSlot slot, KeyRef key);
  ~WebSocketSession() override;

  // Accepts the upgrade `request` (already read by the HTTP session).
  void run(boost::beast::http::request<boost::beast::http::string_body> request);
  void shutdown() override;
  void cancel_requests(const std::string& reason) override;
  const boost::asio::any_io_executor& executor() const { return executor_; }

 private:
  struct Running {
    std::unique_ptr<CompletionJob> job;
    std::vector<CancelFn> cancels;
    bool overflowed = false;  // deltas are dropped; the final event still goes
    RequestRecord record;
    KeyLease lease;           // its place under its key's limits
  };

  void on_accept(boost::beast::error_code ec);
  void do_read();
  void on_read(boost::beast::error_code ec, std::size_t bytes);
  void handle_message(std::string_view text);
  void arm_message_deadline();
  void close_for_message_rate();
  void close_for_message_size();
  void close_after_queue(boost::beast::websocket::close_code code);
  // An error event for a message that runs nothing, and its access-log line.
  // `record`: the request's, when it was planned (else a new one).
  void refuse(const ApiError& error, const ApiRequest& request, RequestRecord record = {});
  // Every request being planned: withdrawn and answered `why`.
  void refuse_planning(const ApiError& why);
  void end_record(Running& r, int status_if_ok);
  void plan(WsStart start);
  void start(WsStart start, uint64_t serial, RequestRecord record);
  void on_engine_event(uint64_t serial, int32_t choice, const StreamEvent& event);
  void cancel(Running& r);
  void cancel_all();

  void send(std::string message);
  void do_write();
  void on_write(boost::beast::error_code ec, std::size_t bytes);
  void on_close(boost::beast::error_code ec);

  const boost::asio::any_io_executor executor_;
  boost::beast::websocket::stream<boost::beast::tcp_stream> ws_;
  boost::beast::flat_buffer buffer_;
  std::shared_ptr<ServerState> state_;
  ConnectionSlot slot_;  // after state_: released before it
  uint64_t registry_id_ = 0;
  const uint64_t connection_;
  const KeyRef key_;
  std::optional<TokenBucket> message_rate_;  // set when ws_max_messages_per_second is
  boost::asio::steady_timer message_deadline_;  // a message begun must end within idle_timeout
  bool message_deadline_armed_ = false;
  boost::beast::websocket::close_code close_code_ = boost::beast::websocket::close_code::going_away;

  std::deque<std::string> queue_;
  size_t queued_bytes_ = 0;
  bool write_in_flight_ = false;
  bool closing_ = false;   // close after the queue drains
  bool closed_ = false;

  uint64_t next_serial_ = 1;
  std::map<uint64_t, Running> running_;       // by serial
  std::map<std::string, uint64_t> by_client_id_;
  // Requests being planned, by id key (they count as running).
  struct Planning {
    uint64_t serial = 0;
    std::string client_id;
    bool client_id_is_number = false;
    int32_t n = 1, prompts = 1;  // its choices: n for each prompt
    RequestRecord record;    // in flight (a drain waits for it)
    std::function<void()> withdraw;  // ServerState::plan's
  };
  std::map<std::string, Planning> planning_;
  // A request cancelled while planned: withdrawn, its final event sent.
  void end_before_engine(Planning& p);
};

}  // namespace conveyor::http
