// Engine metrics that are events rather than state: latency histograms and
// counters, fed by the scheduler and the stream actors, read by /metrics.
// State (queue lengths, KV usage, token totals) comes from EngineStats.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "engine/engine_types.hpp"

namespace conveyor {

// A Prometheus histogram: cumulative counts per upper bound, plus sum and count.
class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  void observe(double value);

  struct Snapshot {
    std::vector<double> upper_bounds;
    std::vector<uint64_t> cumulative;  // per bound, then +Inf last
    double sum = 0.0;
    uint64_t count = 0;
  };
  Snapshot snapshot() const;
  // The q-quantile, interpolated linearly inside its bucket (0 when empty).
  double quantile(double q) const;

 private:
  mutable std::mutex mutex_;
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket (not cumulative), +Inf last
  double sum_ = 0.0;
  uint64_t count_ = 0;
};

class EngineMetrics {
 public:
  EngineMetrics();

  Histogram time_to_first_token;  // seconds, submit to first token
  Histogram inter_token_latency;  // seconds between tokens of one request
  Histogram e2e_request_latency;  // seconds, submit to last event
  Histogram request_queue_time;   // seconds, submit to first scheduled
  Histogram iteration_tokens;     // tokens per iteration
  Histogram executor_idle;        // seconds the executor waited between consecutive steps

  void count_finished(FinishReason reason);
  uint64_t finished(FinishReason reason) const;

  // Engine restarts after a fault (actors/scheduler_actor.hpp), and whether
  // one is under way (the scheduler waits for the failed workers' last replies).
  std::atomic<uint64_t> restarts{0};
  std::atomic<bool> restarting{false};
  // Counts a restart and tells the listener (on the scheduler's thread) what failed.
  void restarted(const std::string& fault);
  void on_restart(std::function<void(const std::string& fault)> listener);

 private:
  mutable std::mutex mutex_;
  std::array<uint64_t, 5> finished_{};  // by FinishReason
  std::function<void(const std::string&)> restart_listener_;
};

// Bounds shared by the latency histograms (vLLM's, in seconds).
std::vector<double> latency_buckets();

}  // namespace conveyor
