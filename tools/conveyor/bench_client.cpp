#include "tools/conveyor/bench_client.hpp"

#include <chrono>
#include <csignal>
#include <memory>
#include <optional>
#include <unordered_set>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/json.hpp>

#include "http/sse_client.hpp"

namespace conveyor::bench {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;
using Stream = beast::tcp_stream;
using Parser = http::response_parser<http::string_body>;

double seconds(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

Clock::duration to_duration(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

// The message of an OpenAI-style error body, else its first bytes.
std::string error_message_of(const std::string& body) {
  boost::system::error_code ec;
  const auto v = boost::json::parse(body, ec);
  if (!ec && v.is_object()) {
    if (const auto* e = v.get_object().if_contains("error"); e && e->is_object())
      if (const auto* m = e->get_object().if_contains("message"); m && m->is_string())
        return std::string(m->get_string());
  }
  return body.substr(0, 200);
}

http::request<http::string_body> make_request(http::verb verb, const ServerUrl& url,
                                              std::string_view path, std::string body) {
  http::request<http::string_body> req{verb, url.prefix + std::string(path), 11};
  req.set(http::field::host, url.host_header());
  req.set(http::field::user_agent, "conveyor-bench");
  if (!url.api_key.empty()) req.set(http::field::authorization, "Bearer " + url.api_key);
  if (verb == http::verb::post) {
    req.set(http::field::content_type, "application/json");
    req.set(http::field::accept, "text/event-stream");
  }
  req.keep_alive(true);
  req.body() = std::move(body);
  req.prepare_payload();
  return req;
}

class Call;

// Owns the run: when to send, the connection pool, the records. Every
// member is touched only from the io_context's one thread.
class Runner {
 public:
  Runner(const LoadPlan& plan, WorkloadSource& workload, const ProgressFn& progress)
      : plan_(plan), workload_(workload), progress_(progress), progress_timer_(ioc_),
        arrival_timer_(ioc_), signals_(ioc_, SIGINT, SIGTERM), arrivals_(plan.rate, plan.seed) {}

  LoadResult run();

  asio::io_context& ioc() { return ioc_; }
  const LoadPlan& plan() const { return plan_; }
  const tcp::resolver::results_type& endpoints() const { return endpoints_; }
  void on_tokens(int64_t n) { output_tokens_ += n; }
  void on_complete(const std::shared_ptr<Call>& call, size_t index, RequestResult result,
                   std::unique_ptr<Stream> reusable);

 private:
  bool closed_loop() const { return plan_.rate <= 0; }
  bool past_deadline() const {
    return plan_.duration_s > 0 && Clock::now() >= start_ + to_duration(plan_.duration_s);
  }
  bool count_left(int64_t issued) const { return plan_.num_requests == 0 || issued < plan_.num_requests; }
  bool under_cap() const { return plan_.concurrency <= 0 || in_flight_ < plan_.concurrency; }
  void launch();
  void schedule_arrival();
  void on_arrival();
  void tick();
  void on_signal();
  void maybe_finish();
  Progress snapshot() const;

  asio::io_context ioc_;
  const LoadPlan& plan_;
  WorkloadSource& workload_;
  const ProgressFn& progress_;
  asio::steady_timer progress_timer_;
  asio::steady_timer arrival_timer_;
  asio::signal_set signals_;
  PoissonArrivals arrivals_;
  tcp::resolver::results_type endpoints_;

  std::vector<std::unique_ptr<Stream>> pool_;  // idle keep-alive connections
  std::unordered_set<std::shared_ptr<Call>> active_;
  std::vector<RequestResult> results_;
  std::vector<bool> dropped_;  // abandoned at an interrupt
  std::optional<MetricsPoller> metrics_;

  Clock::time_point start_;
  Clock::time_point last_completion_;
  int64_t sent_ = 0, completed_ = 0, failed_ = 0, in_flight_ = 0, output_tokens_ = 0;
  int64_t waiting_arrivals_ = 0;  // arrived while the concurrency cap was reached
  bool arrivals_done_ = false;
  bool interrupted_ = false;
  bool finished_ = false;
};

// One streaming request: connect (or reuse a pooled connection), write, read
// the header, then read the SSE body piece by piece, timing every chunk.
class Call : public std::enable_shared_from_this<Call> {
 public:
  Call(Runner& runner, size_t index, int64_t prompt_len_hint, std::string body)
      : runner_(runner), index_(index), prompt_len_hint_(prompt_len_hint),
        request_(make_request(http::verb::post, runner.plan().url, endpoint_path(runner.plan().endpoint),
                              std::move(body))) {}

  void start(std::unique_ptr<Stream> pooled) {
    t_send_ = Clock::now();
    if (pooled) {
      stream_ = std::move(pooled);
      reused_ = true;
      write();
    } else {
      connect();
    }
  }

  void abort() {
    beast::error_code ignored;
    if (stream_) stream_->socket().close(ignored);
  }

 private:
  void arm() { stream_->expires_after(to_duration(runner_.plan().timeout_s)); }

  void connect() {
    reused_ = false;
    stream_ = std::make_unique<Stream>(runner_.ioc());
    arm();
    stream_->async_connect(runner_.endpoints(),
                           [self = shared_from_this()](beast::error_code ec, const tcp::endpoint&) {
                             self->on_connect(ec);
                           });
  }

  void on_connect(beast::error_code ec) {
    if (ec) return fail("connect", ec.message());
    beast::error_code ignored;
    stream_->socket().set_option(tcp::no_delay(true), ignored);
    write();
  }

  void write() {
    parser_.emplace();
    parser_->body_limit(boost::none);
    buffer_.clear();
    arm();
    http::async_write(*stream_, request_, [self = shared_from_this()](beast::error_code ec, size_t) {
      self->on_write(ec);
    });
  }

  void on_write(beast::error_code ec) {
    if (ec) return retry_or_fail("io", ec);
    arm();
    http::async_read_header(*stream_, buffer_, *parser_,
                            [self = shared_from_this()](beast::error_code ec, size_t) { self->on_header(ec); });
  }

  // A pooled connection the server closed while it sat idle fails before
  // any answer arrives: try once more on a fresh one.
  void retry_or_fail(const char* kind, beast::error_code ec) {
    if (reused_ && !retried_ && ec != asio::error::operation_aborted && ec != beast::error::timeout) {
      retried_ = true;
      beast::error_code ignored;
      stream_->socket().close(ignored);
      return connect();
    }
    fail(kind, ec.message());
  }

  void on_header(beast::error_code ec) {
    if (ec) return retry_or_fail("io", ec);
    result_.http_status = static_cast<int>(parser_->get().result_int());
    if (parser_->get().result() != http::status::ok) {
      arm();
      return http::async_read(*stream_, buffer_, *parser_,
                              [self = shared_from_this()](beast::error_code ec, size_t) {
                                self->on_error_body(ec);
                              });
    }
    read_more();
  }

  void on_error_body(beast::error_code ec) {
    std::string message = "HTTP " + std::to_string(result_.http_status);
    if (!ec) message += ": " + error_message_of(parser_->get().body());
    fail("http " + std::to_string(result_.http_status), std::move(message), !ec);
  }

  void read_more() {
    arm();
    http::async_read_some(*stream_, buffer_, *parser_,
                          [self = shared_from_this()](beast::error_code ec, size_t) { self->on_read(ec); });
  }

  void on_read(beast::error_code ec) {
    const auto now = Clock::now();
    auto& body = parser_->get().body();
    if (!body.empty()) {
      // The string_body reader appends at the string's current end, so
      // clearing what was consumed keeps memory flat on long streams.
      for (const auto& event : sse_.feed(body)) take_event(event, now);
      body.clear();
    }
    if (ec) return fail(ec == beast::error::timeout ? "timeout" : "io", ec.message());
    if (parser_->is_done()) return finish(now);
    read_more();
  }

  void take_event(std::string_view data, Clock::time_point t) {
    const ChunkInfo c = parse_chunk(data);
    if (c.done) {
      saw_done_ = true;
      return;
    }
    if (c.error) {
      if (!stream_error_) stream_error_ = *c.error;
      return;
    }
    if (c.tokens > 0) {
      if (tokens_ == 0) {
        result_.ttft_s = seconds(t_send_, t);
      } else {
        const double gap = seconds(t_last_, t) / static_cast<double>(c.tokens);
        result_.itl_s.insert(result_.itl_s.end(), static_cast<size_t>(c.tokens), gap);
      }
      t_last_ = t;
      tokens_ += c.tokens;
      runner_.on_tokens(c.tokens);
    }
    if (c.finish_reason) result_.finish_reason = *c.finish_reason;
    if (c.usage_prompt_tokens) usage_prompt_ = c.usage_prompt_tokens;
    if (c.usage_completion_tokens) usage_completion_ = c.usage_completion_tokens;
  }

  void finish(Clock::time_point now) {
    result_.e2e_s = seconds(t_send_, now);
    if (stream_error_) return fail("stream error", *stream_error_, true);
    if (!saw_done_) return fail("incomplete", "the stream ended without data: [DONE]", true);
    result_.ok = true;
    result_.output_tokens = usage_completion_.value_or(tokens_);
    result_.input_tokens = usage_prompt_.value_or(prompt_len_hint_);
    if (tokens_ == 0) result_.ttft_s = result_.e2e_s;
    complete(true);
  }

  void fail(std::string kind, std::string message, bool connection_usable = false) {
    result_.ok = false;
    result_.error_kind = std::move(kind);
    result_.error_message = std::move(message);
    if (result_.e2e_s == 0) result_.e2e_s = seconds(t_send_, Clock::now());
    complete(connection_usable);
  }

  void complete(bool connection_usable) {
    std::unique_ptr<Stream> reusable;
    if (connection_usable && parser_ && parser_->is_done() && parser_->keep_alive() &&
        buffer_.size() == 0 && stream_->socket().is_open()) {
      stream_->expires_never();
      reusable = std::move(stream_);
    }
    runner_.on_complete(shared_from_this(), index_, std::move(result_), std::move(reusable));
  }

  Runner& runner_;
  size_t index_;
  int64_t prompt_len_hint_;
  http::request<http::string_body> request_;
  std::unique_ptr<Stream> stream_;
  beast::flat_buffer buffer_;
  std::optional<Parser> parser_;
  SseDecoder sse_;
  RequestResult result_;
  Clock::time_point t_send_, t_last_;
  int64_t tokens_ = 0;
  std::optional<int64_t> usage_prompt_, usage_completion_;
  std::optional<std::string> stream_error_;
  bool saw_done_ = false;
  bool reused_ = false;
  bool retried_ = false;
};

LoadResult Runner::run() {
  LoadResult out;
  tcp::resolver resolver(ioc_);
  beast::error_code ec;
  endpoints_ = resolver.resolve(plan_.url.host, plan_.url.port, ec);
  if (ec) return out;  // fetch_models has already reported an unreachable server

  signals_.async_wait([this](beast::error_code ec, int) {
    if (!ec) on_signal();
  });
  start_ = last_completion_ = Clock::now();
  if (plan_.metrics_interval_s > 0) {
    metrics_.emplace(ioc_, plan_.url, plan_.metrics_interval_s, start_);
    metrics_->start();
  }
  if (closed_loop()) {
    for (int64_t i = 0; i < std::max<int64_t>(1, plan_.concurrency) && count_left(sent_); ++i) launch();
  } else {
    schedule_arrival();
  }
  progress_timer_.expires_after(std::chrono::seconds(1));
  progress_timer_.async_wait([this](beast::error_code ec) {
    if (!ec) tick();
  });
  maybe_finish();
  ioc_.run();

  out.duration_s = seconds(start_, last_completion_);
  out.interrupted = interrupted_;
  if (metrics_) out.metrics = metrics_->series();
  for (size_t i = 0; i < results_.size(); ++i)
    if (!dropped_[i]) out.results.push_back(std::move(results_[i]));
  return out;
}

void Runner::launch() {
  RequestSpec spec = workload_.next();
  std::string body = build_request_body(plan_.endpoint, spec, plan_.options);
  const size_t index = results_.size();
  results_.emplace_back();
  dropped_.push_back(false);
  results_[index].start_s = seconds(start_, Clock::now());
  auto call = std::make_shared<Call>(*this, index, spec.prompt_len_hint, std::move(body));
  active_.insert(call);
  ++sent_;
  ++in_flight_;
  std::unique_ptr<Stream> pooled;
  if (!pool_.empty()) {
    pooled = std::move(pool_.back());
    pool_.pop_back();
  }
  call->start(std::move(pooled));
}

void Runner::on_complete(const std::shared_ptr<Call>& call, size_t index, RequestResult result,
                         std::unique_ptr<Stream> reusable) {
  active_.erase(call);
  --in_flight_;
  last_completion_ = Clock::now();
  if (interrupted_) {
    dropped_[index] = !result.ok;
  }
  if (!dropped_[index]) ++(result.ok ? completed_ : failed_);
  const double start_s = results_[index].start_s;
  results_[index] = std::move(result);
  results_[index].start_s = start_s;
  if (reusable && !finished_ && !interrupted_) pool_.push_back(std::move(reusable));

  if (!interrupted_) {
    if (closed_loop()) {
      if (count_left(sent_) && !past_deadline()) launch();
    } else if (waiting_arrivals_ > 0 && under_cap()) {
      --waiting_arrivals_;
      launch();
    }
  }
  maybe_finish();
}

void Runner::schedule_arrival() {
  if (!count_left(sent_ + waiting_arrivals_)) {
    arrivals_done_ = true;
    return;
  }
  arrival_timer_.expires_at(start_ + to_duration(arrivals_.next()));
  arrival_timer_.async_wait([this](beast::error_code ec) {
    if (!ec) on_arrival();
  });
}

void Runner::on_arrival() {
  if (finished_) return;
  if (past_deadline() || interrupted_) {
    arrivals_done_ = true;
    return maybe_finish();
  }
  if (under_cap()) {
    launch();
  } else {
    ++waiting_arrivals_;
  }
  schedule_arrival();
  maybe_finish();
}

void Runner::maybe_finish() {
  if (finished_ || in_flight_ > 0) return;
  const bool more = interrupted_ ? false
                    : closed_loop() ? count_left(sent_) && !past_deadline()
                                    : !arrivals_done_ || waiting_arrivals_ > 0;
  if (more) return;
  finished_ = true;
  progress_timer_.cancel();
  arrival_timer_.cancel();
  if (metrics_) metrics_->stop();
  beast::error_code ignored;
  signals_.cancel(ignored);
  pool_.clear();
}

Progress Runner::snapshot() const {
  Progress p;
  p.elapsed_s = seconds(start_, Clock::now());
  p.sent = sent_;
  p.completed = completed_;
  p.failed = failed_;
  p.in_flight = in_flight_;
  p.output_tokens = output_tokens_;
  return p;
}

void Runner::tick() {
  if (finished_) return;
  if (progress_) progress_(snapshot());
  progress_timer_.expires_after(std::chrono::seconds(1));
  progress_timer_.async_wait([this](beast::error_code ec) {
    if (!ec) tick();
  });
}

void Runner::on_signal() {
  interrupted_ = true;
  arrivals_done_ = true;
  waiting_arrivals_ = 0;
  arrival_timer_.cancel();
  // Copy: abort() completes nothing synchronously, but keep iteration safe.
  const auto calls = active_;
  for (const auto& c : calls) c->abort();
  maybe_finish();
}

}  // namespace

LoadResult run_load(const LoadPlan& plan, WorkloadSource& workload, const ProgressFn& progress) {
  Runner runner(plan, workload, progress);
  return runner.run();
}

Expected<std::vector<std::string>> fetch_models(const ServerUrl& url, double timeout_s) {
  const std::string where = "http://" + url.host_header() + url.prefix;
  asio::io_context ioc;
  tcp::resolver resolver(ioc);
  beast::error_code ec;
  const auto endpoints = resolver.resolve(url.host, url.port, ec);
  if (ec) return make_error(Errc::io_error, "cannot resolve " + url.host + ": " + ec.message());

  Stream stream(ioc);
  auto req = make_request(http::verb::get, url, "/v1/models", {});
  http::response<http::string_body> res;
  beast::flat_buffer buffer;
  std::string failed_step;
  beast::error_code failure;
  auto fail = [&](const char* step, beast::error_code e) {
    failed_step = step;
    failure = e;
  };
  stream.expires_after(to_duration(timeout_s));
  stream.async_connect(endpoints, [&](beast::error_code e, const tcp::endpoint&) {
    if (e) return fail("connect", e);
    http::async_write(stream, req, [&](beast::error_code e, size_t) {
      if (e) return fail("send", e);
      http::async_read(stream, buffer, res, [&](beast::error_code e, size_t) {
        if (e) fail("read", e);
      });
    });
  });
  ioc.run();
  if (failure) {
    std::string message = "cannot reach " + where + " (" + failed_step + ": " + failure.message() + ")";
    if (failed_step == "connect") message += "; is `conveyor serve` running there?";
    return make_error(Errc::io_error, message);
  }
  if (res.result() != http::status::ok)
    return make_error(Errc::io_error, "GET " + where + "/v1/models answered HTTP " +
                                          std::to_string(res.result_int()) + ": " +
                                          error_message_of(res.body()));
  std::vector<std::string> ids;
  const auto v = boost::json::parse(res.body(), ec);
  const auto* data = !ec && v.is_object() ? v.get_object().if_contains("data") : nullptr;
  if (!data || !data->is_array())
    return make_error(Errc::bad_format, "GET " + where + "/v1/models: not a model list");
  for (const auto& m : data->get_array())
    if (const auto* o = m.if_object())
      if (const auto* id = o->if_contains("id"); id && id->is_string()) ids.emplace_back(id->get_string());
  if (ids.empty()) return make_error(Errc::bad_format, "GET " + where + "/v1/models: no models listed");
  return ids;
}

}  // namespace conveyor::bench
