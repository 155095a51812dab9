#include "http/request_record.hpp"

#include "http/server_log.hpp"
#include "http/server_state.hpp"

namespace conveyor::http {
namespace {

double millis_between(std::chrono::steady_clock::time_point from, std::chrono::steady_clock::time_point to) {
  return std::chrono::duration<double, std::milli>(to - from).count();
}

}  // namespace

LogLevel request_log_level(std::string_view method, std::string_view route, int status, bool error) {
  if (method == "GET" && route == "/favicon.ico" && status == 404 && !error) return LogLevel::debug;
  if (status >= 400 || error) return LogLevel::warn;
  const bool probe = method == "GET" && (route == "/health" || route == "/metrics");
  return probe ? LogLevel::debug : LogLevel::info;
}

RequestRecord::RequestRecord(uint64_t connection, std::string method, std::string route)
    : open_(true), connection_(connection), method_(std::move(method)), route_(std::move(route)),
      start_(Clock::now()) {}

RequestRecord::~RequestRecord() {
  if (open_) {
    if (job_) job_->cancelled = true;
    end(499);
  }
}

RequestRecord::RequestRecord(RequestRecord&& other) noexcept { *this = std::move(other); }

RequestRecord& RequestRecord::operator=(RequestRecord&& other) noexcept {
  if (this == &other) return *this;
  if (open_) end(499);
  open_ = std::exchange(other.open_, false);
  in_flight_ = std::exchange(other.in_flight_, nullptr);
  connection_ = other.connection_;
  request_id_ = std::move(other.request_id_);
  method_ = std::move(other.method_);
  route_ = std::move(other.route_);
  stream_ = other.stream_;
  start_ = other.start_;
  first_token_ = other.first_token_;
  job_ = std::move(other.job_);
  error_ = std::move(other.error_);
  return *this;
}

void RequestRecord::run_on_engine(ServerState& state) {
  if (!open_ || in_flight_) return;
  in_flight_ = &state;
  state.request_started();
}

void RequestRecord::on_tokens() {
  if (!first_token_) first_token_ = Clock::now();
}

void RequestRecord::set_job(const JobSummary& job) { job_ = job; }

void RequestRecord::end(int status) {
  if (!open_) return;
  open_ = false;
  const Clock::time_point now = Clock::now();
  std::string error = error_;
  if (error.empty() && job_ && job_->error) error = job_->error->message;
  const LogLevel level = request_log_level(method_, route_, status, !error.empty());
  if (log_enabled(level)) {
    const LogValue none;
    auto or_none = [&](bool present, LogValue value) { return present ? value : none; };
    log_line(level, "request",
             {
                 {"conn", connection_},
                 {"request_id", request_id_.empty() ? LogValue() : LogValue(request_id_)},
                 {"method", method_},
                 {"route", route_},
                 {"status", status},
                 {"stream", stream_},
                 {"prompt_tokens", or_none(bool(job_), job_ ? job_->prompt_tokens : 0)},
                 {"completion_tokens", or_none(bool(job_), job_ ? job_->completion_tokens : 0)},
                 {"ttft_ms", or_none(bool(first_token_), first_token_ ? millis_between(start_, *first_token_) : 0.0)},
                 {"duration_ms", millis_between(start_, now)},
                 {"finish_reason", or_none(bool(job_), std::string(job_ ? to_string(job_->finish) : ""))},
                 {"cancelled", or_none(bool(job_), job_ ? job_->cancelled : false)},
                 {"error", or_none(!error.empty(), error)},
             });
  }
  if (ServerState* state = std::exchange(in_flight_, nullptr)) state->request_ended();
}

}  // namespace conveyor::http
