// The engine's line in the server log, every log_stats_interval seconds
// (message "engine", level info):
//   running, waiting, swapped     requests in each queue now
//   kv_usage                      share of the KV blocks in use now (0 to 1)
//   generation_tokens_per_s       tokens generated since the previous line (the first
//                                 line: since the server started), per second
//   prompt_tokens_per_s           prompt tokens of the requests accepted since then, per second
//   requests_in_flight            requests the server is answering from the engine
// A quiet engine writes one line when it falls idle and none after, until
// work comes again.
//
// This class is the arithmetic and the line, without I/O: the server's timer
// asks the engine for its stats (without blocking) and hands the answer
// here, on whatever thread it arrives. Thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>

#include "engine/engine_types.hpp"
#include "http/server_log.hpp"

namespace conveyor::http {

class EngineSummary {
 public:
  using Clock = std::chrono::steady_clock;

  // The first line's rates count from `start`, with the engine's counters at
  // zero (an engine that has just started).
  explicit EngineSummary(Clock::time_point start = Clock::now()) : last_{start, 0, 0, true} {}

  // The line's fields for `stats` taken at `now`, or nothing when the engine
  // was idle at the previous line and still is; remembers them for the next.
  std::optional<LogFields> next(const EngineStats& stats, size_t requests_in_flight, Clock::time_point now);
  // next(), written to the log.
  void log(const EngineStats& stats, size_t requests_in_flight, Clock::time_point now = Clock::now());

 private:
  struct Seen {
    Clock::time_point time;
    uint64_t generated_tokens = 0;
    uint64_t prompt_tokens = 0;
    bool idle = false;
  };
  std::mutex mutex_;
  Seen last_;
};

}  // namespace conveyor::http
