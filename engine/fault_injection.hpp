// Fault injection, for tests of the engine's recovery (engine restarts,
// actors/scheduler_actor.hpp). Compiled in and off by default: an engine
// injects faults only when EngineConfig::fault_injection names some, which
// tests do directly and `conveyor serve` only with --debug-fault-injection
// (from the CONVEYOR_FAULTS environment variable; ignored without the flag).
//
// A spec lists faults, comma-separated, each `point=N` (the point's Nth
// event fails, once) or `point=N+` (its Nth event and every one after):
//   executor=N   the executor throws in its Nth step (before running it)
//   swap=N       the Nth swap order fails (its copies are not made)
//   alloc=N      the Nth allocation batch fails (the block manager refuses)
// Counts run over the engine's life, across restarts: `executor=3` fails
// step 3 only, and the step after the restart runs.
//
// Thread-safety: hit() may be called from any thread.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "base/status.hpp"

namespace conveyor {

enum class FaultPoint : uint8_t { executor, swap, alloc };
inline constexpr size_t kFaultPoints = 3;

class FaultInjector {
 public:
  // Parses a spec (see above); "" gives an injector that never fires.
  static Expected<std::shared_ptr<FaultInjector>> parse(std::string_view spec);

  // Counts one event at `point`; true when it must fail.
  bool hit(FaultPoint point);
  // Events counted at `point` so far.
  int64_t count(FaultPoint point) const { return points_[size_t(point)].seen.load(); }

 private:
  struct Point {
    int64_t at = 0;       // 0: never
    bool onward = false;  // every event from `at` on
    std::atomic<int64_t> seen{0};
  };
  std::array<Point, kFaultPoints> points_;
};

// The message an injected fault carries ("injected fault: executor step 3").
std::string describe_fault(FaultPoint point, int64_t n);

}  // namespace conveyor
