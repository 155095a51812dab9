// One request as the access log sees it. A session opens a record when it has
// read a request (an HTTP request, or one WebSocket message that asks for a
// completion), fills it in as the request runs, and ends it once: when the
// whole answer is queued, or when the client is gone. end() writes the
// request's line; a record destroyed while open ends as cancelled (status
// 499, nginx's "client closed the request").
//
// A record of a request that runs on the engine (run_on_engine()) also
// counts in ServerState's requests in flight until it ends: the drain waits
// for that count to reach zero.
//
// The line: message "request", level info; warn for a status of 400 or more,
// or a request that ended with an error; debug for GET /health and
// GET /metrics, which probes call every few seconds. Fields, in this order
// (null where they do not apply):
//   conn               the connection's number (one per TCP connection)
//   request_id         the response's id ("cmpl-...", "chatcmpl-..."), or the
//                      WebSocket request's id as its client gave it
//   method, route      "POST", "/v1/completions"; "WS", "/v1/ws" for a WebSocket request
//   status             the HTTP status sent (WebSocket requests: 200, or the
//                      status their error maps to; 499 if the client left first)
//   stream             the answer was streamed (SSE, WebSocket)
//   prompt_tokens, completion_tokens, finish_reason, cancelled
//                      completions only: all prompts and choices together;
//                      finish_reason error > cancelled > length > stop
//   ttft_ms            read to first token (completions that produced one)
//   duration_ms        read to end
//   error              the error message of a refused or failed request
//
// Not thread-safe: a record is used on its session's strand.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "http/completion_job.hpp"
#include "http/server_log.hpp"

namespace conveyor::http {

class ServerState;

// The level of a request's log line: warn for a failed request (a status of
// 400 or more, or an error message), else info. Health and metrics probes go
// one level down, to debug; so does the 404 of GET /favicon.ico, which
// browsers ask for by themselves when they open the playground.
LogLevel request_log_level(std::string_view method, std::string_view route, int status, bool error);

class RequestRecord {
 public:
  RequestRecord() = default;  // not open: end() does nothing
  RequestRecord(uint64_t connection, std::string method, std::string route);
  ~RequestRecord();
  RequestRecord(RequestRecord&& other) noexcept;
  RequestRecord& operator=(RequestRecord&& other) noexcept;
  RequestRecord(const RequestRecord&) = delete;
  RequestRecord& operator=(const RequestRecord&) = delete;

  bool open() const { return open_; }
  // Counts the request in `state`'s requests in flight until it ends.
  void run_on_engine(ServerState& state);
  void set_id(std::string id) { request_id_ = std::move(id); }
  void set_stream(bool stream) { stream_ = stream; }
  void set_error(std::string message) { error_ = std::move(message); }
  // Call on every event that carries tokens: the first one sets the TTFT.
  void on_tokens();
  // The job's tokens and end, taken before the job goes.
  void set_job(const JobSummary& job);
  // Writes the line (once) and leaves the count of requests in flight.
  void end(int status);

 private:
  using Clock = std::chrono::steady_clock;

  bool open_ = false;
  ServerState* in_flight_ = nullptr;  // set while counted
  uint64_t connection_ = 0;
  std::string request_id_;
  std::string method_;
  std::string route_;
  bool stream_ = false;
  Clock::time_point start_{};
  std::optional<Clock::time_point> first_token_;
  std::optional<JobSummary> job_;
  std::string error_;
};

}  // namespace conveyor::http
