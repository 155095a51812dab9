// Planning a request in lanes: a planning thread that never compiles a
// grammar, and compiling threads that do (ServerState::plan).
//
// A grammar the cache lacks (a new schema or tool list) takes milliseconds
// to seconds to compile; on the thread that plans every request, each one
// behind it would wait. So work() runs first on `planner` under a
// ConstraintCompiler::MissesDeferred: when it met no miss, its result is
// delivered; when it met one, what it planned is incomplete and dropped, and
// work() runs again on a compiling lane, where the miss compiles (the cache
// may have it by then: another request compiled it meanwhile). The lane is
// chosen by the expected compile time
// (ConstraintCompiler::MissesDeferred::expected_compile_time): up to
// kQuickCompile on `compiling.quick`, longer on `compiling.slow`, so a small
// new schema never waits for a large one compiling; and on each, work is due
// when it was queued plus its expected time, so a smaller one passes larger
// ones queued just before it.
//
// `wanted()` is asked before each run of work(): a request whose client went
// is not planned, or compiled, for no one. deliver(result) runs on the
// thread that ran work() to its end.
//
// Thread-safety: as WorkQueue::submit; work, wanted and deliver are copied
// into the jobs and may run on any of the queues' threads (work twice).
#pragma once

#include <chrono>
#include <utility>

#include "http/constraint_compiler.hpp"
#include "http/work_queue.hpp"

namespace conveyor::http {

struct CompilingLanes {
  WorkQueue& quick;
  WorkQueue& slow;
};

// The expected compile time up to which a grammar compiles on the quick lane:
// a schema or tool list of up to 2 KB (most agents'; they compile in a few
// milliseconds, at most tens).
inline constexpr std::chrono::milliseconds kQuickCompile{200};

template <class Work, class Wanted, class Deliver>
void plan_in_lanes(WorkQueue& planner, CompilingLanes compiling, Work work, Wanted wanted, Deliver deliver) {
  planner.submit([compiling, work = std::move(work), wanted = std::move(wanted), deliver = std::move(deliver)] {
    if (!wanted()) return;
    std::chrono::nanoseconds expected;
    {
      ConstraintCompiler::MissesDeferred misses;
      auto result = work();
      if (!misses.deferred()) return deliver(std::move(result));
      expected = misses.expected_compile_time();
    }
    (expected <= kQuickCompile ? compiling.quick : compiling.slow).submit(
        [work, wanted, deliver] {
          if (wanted()) deliver(work());
        },
        expected);
  });
}

}  // namespace conveyor::http
