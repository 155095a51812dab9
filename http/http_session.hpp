// One HTTP connection: reads requests one at a time, answers them, streams
// completions as Server-Sent Events, and hands a WebSocket upgrade over to a
// websocket_session.
//
// All state lives on the connection's strand; engine events come in through
// ServerState::post. Output goes through one byte queue with a single write
// outstanding ("already writing?"); queued bytes are bounded by
// max_output_bytes, past which the streaming request is cancelled and the
// connection closed (a client that stops reading never holds the engine).
// While a completion is planned (on a planning thread: ServerState::plan)
// and while it runs, a read stays pending on the socket so that a client
// that goes away cancels its request at once, not at the next write.
//
// Each request gets a RequestRecord (its access-log line). While the server
// drains, every request but GET /metrics is answered 503 (/health with a
// body that says "draining") and the connection is closed after it.
//
// Limits (http/server_options.hpp): the first request's header must arrive
// within header_timeout_seconds of the accept; between requests the
// connection may be idle for idle_timeout_seconds, and from the next
// request's first byte its header again has header_timeout_seconds; a body
// has idle_timeout_seconds from the end of its header. Each deadline is for
// the whole read, not for each byte, so bytes that trickle in do not extend
// it. A connection that came without a slot (past max_connections) is
// answered 503 with Retry-After and closed without reading a request. A
// completion passes its API key's limits (http/key_gate.hpp) before it
// reaches the engine, and holds its KeyLease until its answer is complete.
#pragma once

#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <deque>
#include <functional>
#include <memory>
#include <optional>

#include "http/completion_job.hpp"
#include "http/embeddings.hpp"
#include "http/request_record.hpp"
#include "http/server_state.hpp"

namespace conveyor::http {

class HttpSession : public SessionBase, public std::enable_shared_from_this<HttpSession> {
 public:
  // `slot`: the connection's place under max_connections; empty: refuse it.
  HttpSession(boost::asio::ip::tcp::socket&& socket, std::shared_ptr<ServerState> state, ConnectionSlot slot);
  ~HttpSession() override;

  void run();
  void shutdown() override;
  void cancel_requests(const std::string& reason) override;
  const boost::asio::any_io_executor& executor() const { return executor_; }

 private:
  enum class ReadPhase : uint8_t { idle, header, body };

  void refuse_connection();
  void do_read();
  void wait_for_request();
  void on_first_bytes(boost::beast::error_code ec, std::size_t bytes);
  void read_header();
  void on_header(boost::beast::error_code ec, std::size_t bytes);
  void read_body();
  void on_read(boost::beast::error_code ec, std::size_t bytes);
  void open_record();  // a record for a request refused before it was routed
  void handle_request();
  template <class Work, class Then>
  void plan_off_thread(Work work, Then then);
  void withdraw_plan();
  void start_completion(bool chat);
  void run_completion(bool chat, const ApiRequest& r, std::variant<RequestPlan, ApiError>& planned);
  void start_response();
  bool admit(const RequestPlan& plan);
  void run_job(std::unique_ptr<ClientJob> job, const RequestPlan& plan, const std::string& id, bool stream);
  void start_metrics();
  void start_embeddings();
  void run_embeddings(EmbeddingRequest& request);
  void on_engine_event(uint64_t serial, int32_t choice, const StreamEvent& event);
  void emit(std::vector<std::string>& payloads);
  void finish_job();
  void cancel_job();
  void drop_job();  // the job ends unfinished (client gone, output overflow)

  // `retry_after_seconds` > 0: a Retry-After header (429s get one anyway).
  void send_error(const ApiError& error, const char* allow = nullptr, int retry_after_seconds = 0);
  // OPTIONS: a browser's CORS preflight, granted to --allowed-origins.
  void answer_preflight(std::string_view target);
  void send_response(unsigned status, std::string body, const char* content_type,
                     const char* allow = nullptr, const char* retry_after = nullptr);
  // A whole response, ready to go (record_ ends with its status).
  void send_message(boost::beast::http::response<boost::beast::http::string_body> res);
  void queue_output(std::string bytes);
  void do_write();
  void on_write(boost::beast::error_code ec, std::size_t bytes);
  void after_response();
  void do_linger();
  // Events of prompt p's samples go to choices first_choice + index.
  EventSink make_sink(int32_t first_choice);
  void start_probe();
  void on_probe(boost::beast::error_code ec, std::size_t bytes);
  void close();

  const boost::asio::any_io_executor executor_;  // the connection's strand
  boost::beast::tcp_stream stream_;
  boost::beast::flat_buffer buffer_;
  std::optional<boost::beast::http::request_parser<boost::beast::http::string_body>> parser_;
  std::shared_ptr<ServerState> state_;
  ConnectionSlot slot_;                // after state_: released before it
  uint64_t registry_id_ = 0;
  std::shared_ptr<HttpSession> hold_;  // set while a request is answered
  RequestRecord record_;               // the request being answered (after state_: it uses it)

  std::deque<std::string> queue_;
  size_t queued_bytes_ = 0;
  std::string writing_;      // the bytes of the write in flight (must outlive it)
  bool write_in_flight_ = false;

  bool keep_alive_ = true;
  bool head_only_ = false;  // a HEAD request: the response's head, without its body
  // The request's Access-Control-Allow-Origin ("" for none: http/origin_policy.hpp).
  std::string cors_origin_;
  bool response_complete_ = false;  // the whole response is queued
  bool busy_ = false;               // a request is being answered
  bool probing_ = false;            // the disconnect probe read is pending
  bool closed_ = false;
  bool shutting_down_ = false;
  bool lingering_ = false;          // answered and closing: draining the client's input

  ReadPhase read_phase_ = ReadPhase::header;  // what a read timeout interrupted
  uint64_t requests_read_ = 0;
  KeyRef key_;                      // the request's API key (null: none needed)
  KeyLease lease_;                  // the completion's place under its key's limits

  uint64_t serial_ = 0;             // tells this request's events from a previous one's
  uint64_t planning_ = 0;           // the serial of the request being planned (0: none)
  std::function<void()> withdraw_plan_;  // ServerState::plan's, while planning_
  std::unique_ptr<ClientJob> job_;
  std::vector<CancelFn> cancels_;
  bool sse_started_ = false;
};

}  // namespace conveyor::http
