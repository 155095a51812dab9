// The server's state during a `conveyor bench` run: GET /metrics every
// `interval` on a connection of its own, keeping the KV cache usage and the
// running and waiting request gauges (conveyor:kv_cache_usage_ratio,
// conveyor:num_requests_running, conveyor:num_requests_waiting) with the time
// each answer arrived. A server without these gauges (not conveyor, or an
// older one) gives an empty series and the reason, never a failed run.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/json/object.hpp>

#include "tools/conveyor/bench_request.hpp"

namespace boost::asio {
class io_context;
}

namespace conveyor::bench {

struct MetricsSample {
  double t_s = 0;            // seconds from the start of the run
  double kv_cache_usage = 0;  // 0..1
  double running = 0;
  double waiting = 0;
};

struct MetricsSeries {
  double interval_s = 0;              // 0: not polled
  std::vector<MetricsSample> samples;
  std::string error;                  // why polling stopped or found nothing; empty if it went well
};

// The value of the first sample of metric `name` in Prometheus text format
// (labels, if any, ignored); nullopt if there is none or it is not a number.
std::optional<double> prometheus_value(std::string_view text, std::string_view name);

// The three gauges from a /metrics body; nullopt unless the KV usage is there
// (running and waiting default to 0 when absent).
std::optional<MetricsSample> parse_engine_gauges(std::string_view text);

// {"interval_s", "t_s": [...], "kv_cache_usage_ratio": [...], "running": [...],
//  "waiting": [...], "error"?}: columns, so a long run stays compact.
boost::json::object to_json(const MetricsSeries& series);

// Polls on `ioc` (the load generator's, so no thread of its own) from
// start() until stop(). Not thread-safe: call everything from the thread
// running `ioc`, or before it runs.
class MetricsPoller {
 public:
  MetricsPoller(boost::asio::io_context& ioc, const ServerUrl& url, double interval_s,
                std::chrono::steady_clock::time_point run_start);
  ~MetricsPoller();
  MetricsPoller(const MetricsPoller&) = delete;
  MetricsPoller& operator=(const MetricsPoller&) = delete;

  void start();
  // Cancels the pending wait or request, so `ioc` can run out of work.
  void stop();
  MetricsSeries series() const;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace conveyor::bench
