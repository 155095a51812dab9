// A token bucket: it holds up to `capacity` tokens and refills at `rate`
// tokens per second. try_take() spends only what the bucket holds; charge()
// spends whatever is asked, so the level may go below zero (a debt that the
// refill pays back before anything can be taken again). Times are passed in,
// so tests drive the clock.
//
// Used for an API key's tokens per minute (http/key_gate.hpp) and a
// WebSocket's messages per second (http/websocket_session.hpp).
// Not thread-safe: the owner locks.
#pragma once

#include <algorithm>
#include <chrono>

namespace conveyor::http {

class TokenBucket {
 public:
  using Clock = std::chrono::steady_clock;

  // Starts full.
  TokenBucket(double capacity, double rate_per_second, Clock::time_point now)
      : capacity_(capacity), rate_(rate_per_second), level_(capacity), last_(now) {}

  // Takes `n` when the bucket holds at least that much; else takes nothing.
  bool try_take(double n, Clock::time_point now) {
    refill(now);
    if (level_ < n) return false;
    level_ -= n;
    return true;
  }
  // Takes `n` whatever the level.
  void charge(double n, Clock::time_point now) {
    refill(now);
    level_ -= n;
  }
  // Gives back `n` taken earlier, up to the capacity.
  void refund(double n, Clock::time_point now) {
    refill(now);
    level_ = std::min(capacity_, level_ + n);
  }
  double level(Clock::time_point now) {
    refill(now);
    return level_;
  }
  // Seconds until the level reaches `want` (0 if it has).
  double seconds_until(double want, Clock::time_point now) {
    refill(now);
    return level_ >= want || rate_ <= 0 ? 0.0 : (want - level_) / rate_;
  }
  // New limits; the level carries over, cut to the new capacity.
  void reconfigure(double capacity, double rate_per_second, Clock::time_point now) {
    refill(now);
    capacity_ = capacity;
    rate_ = rate_per_second;
    level_ = std::min(level_, capacity_);
  }

 private:
  void refill(Clock::time_point now) {
    if (now <= last_) return;
    level_ = std::min(capacity_, level_ + std::chrono::duration<double>(now - last_).count() * rate_);
    last_ = now;
  }

  double capacity_;
  double rate_;
  double level_;
  Clock::time_point last_;
};

}  // namespace conveyor::http
