#include "tools/conveyor/bench_metrics.hpp"

#include <cstdlib>
#include <optional>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/json.hpp>

namespace conveyor::bench {

std::optional<double> prometheus_value(std::string_view text, std::string_view name) {
  size_t line_start = 0;
  while (line_start < text.size()) {
    size_t line_end = text.find('\n', line_start);
    if (line_end == std::string_view::npos) line_end = text.size();
    const std::string_view line = text.substr(line_start, line_end - line_start);
    line_start = line_end + 1;
    if (line.size() <= name.size() || line.substr(0, name.size()) != name) continue;
    std::string_view rest = line.substr(name.size());
    if (rest.front() == '{') {
      const size_t close = rest.find('}');
      if (close == std::string_view::npos) continue;
      rest.remove_prefix(close + 1);
    }
    if (rest.empty() || rest.front() != ' ') continue;  // a longer name that starts with `name`
    const std::string value(rest.substr(1, rest.find(' ', 1) == std::string_view::npos ? std::string_view::npos
                                                                                       : rest.find(' ', 1) - 1));
    char* end = nullptr;
    const double v = std::strtod(value.c_str(), &end);
    if (end == value.c_str()) return std::nullopt;
    return v;
  }
  return std::nullopt;
}

std::optional<MetricsSample> parse_engine_gauges(std::string_view text) {
  const auto kv = prometheus_value(text, "conveyor:kv_cache_usage_ratio");
  if (!kv) return std::nullopt;
  MetricsSample s;
  s.kv_cache_usage = *kv;
  s.running = prometheus_value(text, "conveyor:num_requests_running").value_or(0);
  s.waiting = prometheus_value(text, "conveyor:num_requests_waiting").value_or(0);
  return s;
}

boost::json::object to_json(const MetricsSeries& series) {
  boost::json::array t, kv, running, waiting;
  for (const auto& s : series.samples) {
    t.push_back(s.t_s);
    kv.push_back(s.kv_cache_usage);
    running.push_back(s.running);
    waiting.push_back(s.waiting);
  }
  boost::json::object o{{"interval_s", series.interval_s},
                        {"t_s", std::move(t)},
                        {"kv_cache_usage_ratio", std::move(kv)},
                        {"running", std::move(running)},
                        {"waiting", std::move(waiting)}};
  if (!series.error.empty()) o["error"] = series.error;
  return o;
}

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

// A few failures in a row (the server busy past the timeout, or gone) end
// the polling; one is not enough under heavy load.
constexpr int kMaxFailuresInARow = 3;

}  // namespace

// One keep-alive connection; a request, then a wait until the next tick.
struct MetricsPoller::Impl : std::enable_shared_from_this<MetricsPoller::Impl> {
  Impl(asio::io_context& ioc, const ServerUrl& url, double interval_s, Clock::time_point run_start)
      : ioc(ioc), url(url), interval(std::chrono::duration_cast<Clock::duration>(
                                std::chrono::duration<double>(interval_s))),
        timer(ioc), start(run_start) {
    series.interval_s = interval_s;
  }

  void tick() {
    if (stopped) return;
    if (!stream) {
      stream.emplace(ioc);
      beast::error_code ec;
      const auto endpoints = tcp::resolver(ioc).resolve(url.host, url.port, ec);
      if (ec) return failed("resolve: " + ec.message());
      stream->expires_after(request_timeout());
      stream->async_connect(endpoints, [self = shared_from_this()](beast::error_code ec, const tcp::endpoint&) {
        if (ec) return self->failed("connect: " + ec.message());
        self->send();
      });
      return;
    }
    send();
  }

  void send() {
    if (stopped) return;
    request = {http::verb::get, url.prefix + "/metrics", 11};
    request.set(http::field::host, url.host_header());
    request.set(http::field::user_agent, "conveyor-bench");
    if (!url.api_key.empty()) request.set(http::field::authorization, "Bearer " + url.api_key);
    request.keep_alive(true);
    response = {};
    stream->expires_after(request_timeout());
    http::async_write(*stream, request, [self = shared_from_this()](beast::error_code ec, size_t) {
      if (ec) return self->failed("send: " + ec.message());
      http::async_read(*self->stream, self->buffer, self->response,
                       [self](beast::error_code ec, size_t) { self->on_response(ec); });
    });
  }

  void on_response(beast::error_code ec) {
    if (stopped) return;
    if (ec) return failed("read: " + ec.message());
    if (response.result() != http::status::ok)
      return failed("GET /metrics answered HTTP " + std::to_string(response.result_int()));
    auto sample = parse_engine_gauges(response.body());
    if (!sample) {
      // Not a conveyor server (or one without the gauges): nothing to poll for.
      series.error = "GET /metrics has no conveyor:kv_cache_usage_ratio";
      return stop();
    }
    sample->t_s = std::chrono::duration<double>(Clock::now() - start).count();
    series.samples.push_back(*sample);
    failures = 0;
    if (!response.keep_alive()) close();
    wait();
  }

  void failed(std::string why) {
    if (stopped) return;
    close();
    if (++failures >= kMaxFailuresInARow) {
      series.error = "polling stopped after " + std::to_string(failures) + " failures in a row; last: " + why;
      return stop();
    }
    wait();
  }

  // Fixed rate from the run's start: the next multiple of the interval.
  void wait() {
    const auto now = Clock::now();
    const auto ticks = (now - start) / interval + 1;
    timer.expires_at(start + ticks * interval);
    timer.async_wait([self = shared_from_this()](beast::error_code ec) {
      if (!ec) self->tick();
    });
  }

  Clock::duration request_timeout() const { return std::max<Clock::duration>(interval * 8, std::chrono::seconds(2)); }

  void close() {
    if (!stream) return;
    beast::error_code ignored;
    stream->socket().close(ignored);
    stream.reset();
    buffer.clear();
  }

  void stop() {
    stopped = true;
    timer.cancel();
    close();
  }

  asio::io_context& ioc;
  ServerUrl url;
  Clock::duration interval;
  asio::steady_timer timer;
  Clock::time_point start;
  std::optional<beast::tcp_stream> stream;
  beast::flat_buffer buffer;
  http::request<http::empty_body> request;
  http::response<http::string_body> response;
  MetricsSeries series;
  int failures = 0;
  bool stopped = false;
};

MetricsPoller::MetricsPoller(asio::io_context& ioc, const ServerUrl& url, double interval_s,
                             Clock::time_point run_start)
    : impl_(std::make_shared<Impl>(ioc, url, interval_s, run_start)) {}

MetricsPoller::~MetricsPoller() { impl_->stop(); }

void MetricsPoller::start() { impl_->tick(); }

void MetricsPoller::stop() { impl_->stop(); }

MetricsSeries MetricsPoller::series() const { return impl_->series; }

}  // namespace conveyor::bench
