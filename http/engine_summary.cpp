#include "http/engine_summary.hpp"

#include <algorithm>

namespace conveyor::http {

std::optional<LogFields> EngineSummary::next(const EngineStats& stats, size_t requests_in_flight,
                                             Clock::time_point now) {
  std::lock_guard lock(mutex_);
  const double seconds = std::chrono::duration<double>(now - last_.time).count();
  const uint64_t generated = stats.generated_tokens - std::min(stats.generated_tokens, last_.generated_tokens);
  const uint64_t prompt = stats.prompt_tokens - std::min(stats.prompt_tokens, last_.prompt_tokens);
  const bool busy_now = stats.num_running > 0 || stats.num_waiting > 0 || stats.num_swapped > 0;
  const bool idle = !busy_now && generated == 0 && prompt == 0;
  const bool was_idle = last_.idle;
  last_ = Seen{now, stats.generated_tokens, stats.prompt_tokens, idle};
  if (idle && was_idle) return std::nullopt;
  const double generation_rate = seconds > 0 ? double(generated) / seconds : 0.0;
  const double prompt_rate = seconds > 0 ? double(prompt) / seconds : 0.0;
  return LogFields{
      {"running", stats.num_running},
      {"waiting", stats.num_waiting},
      {"swapped", stats.num_swapped},
      {"kv_usage", stats.blocks.usage_ratio()},
      {"generation_tokens_per_s", generation_rate},
      {"prompt_tokens_per_s", prompt_rate},
      {"requests_in_flight", uint64_t(requests_in_flight)},
  };
}

void EngineSummary::log(const EngineStats& stats, size_t requests_in_flight, Clock::time_point now) {
  if (!log_enabled(LogLevel::info)) return;
  if (auto fields = next(stats, requests_in_flight, now)) log_info("engine", *fields);
}

}  // namespace conveyor::http
