#include "engine/metrics.hpp"

#include <algorithm>

namespace conveyor {

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)), counts_(bounds_.size() + 1, 0) {
  std::sort(bounds_.begin(), bounds_.end());
}

void Histogram::observe(double value) {
  const size_t bucket = size_t(std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin());
  std::lock_guard lock(mutex_);
  ++counts_[bucket];
  sum_ += value;
  ++count_;
}

Histogram::Snapshot Histogram::snapshot() const {
  std::lock_guard lock(mutex_);
  Snapshot s;
  s.upper_bounds = bounds_;
  s.cumulative.resize(counts_.size());
  uint64_t running = 0;
  for (size_t i = 0; i < counts_.size(); ++i) s.cumulative[i] = (running += counts_[i]);
  s.sum = sum_;
  s.count = count_;
  return s;
}

double Histogram::quantile(double q) const {
  const Snapshot s = snapshot();
  if (s.count == 0) return 0.0;
  const double rank = q * double(s.count);
  for (size_t i = 0; i < s.upper_bounds.size(); ++i) {
    if (double(s.cumulative[i]) < rank) continue;
    const double lo = i == 0 ? 0.0 : s.upper_bounds[i - 1];
    const double below = i == 0 ? 0.0 : double(s.cumulative[i - 1]);
    const double in_bucket = double(s.cumulative[i]) - below;
    return lo + (s.upper_bounds[i] - lo) * (in_bucket > 0 ? (rank - below) / in_bucket : 1.0);
  }
  return s.upper_bounds.empty() ? 0.0 : s.upper_bounds.back();  // in the +Inf bucket
}

std::vector<double> latency_buckets() {
  return {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5,
          0.75,  1.0,   2.5,  5.0,  7.5,  10.0, 20.0, 40.0, 80.0};
}

EngineMetrics::EngineMetrics()
    : time_to_first_token(latency_buckets()),
      inter_token_latency(latency_buckets()),
      e2e_request_latency(latency_buckets()),
      request_queue_time(latency_buckets()),
      iteration_tokens({1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192}),
      executor_idle({5e-6, 1e-5, 2e-5, 3e-5, 5e-5, 7.5e-5, 1e-4, 2e-4, 5e-4, 1e-3, 1e-2, 1e-1}) {}

void EngineMetrics::count_finished(FinishReason reason) {
  std::lock_guard lock(mutex_);
  ++finished_[size_t(reason)];
}

uint64_t EngineMetrics::finished(FinishReason reason) const {
  std::lock_guard lock(mutex_);
  return finished_[size_t(reason)];
}

void EngineMetrics::restarted(const std::string& fault) {
  ++restarts;
  std::function<void(const std::string&)> listener;
  {
    std::lock_guard lock(mutex_);
    listener = restart_listener_;
  }
  if (listener) listener(fault);
}

void EngineMetrics::on_restart(std::function<void(const std::string& fault)> listener) {
  std::lock_guard lock(mutex_);
  restart_listener_ = std::move(listener);
}

}  // namespace conveyor
