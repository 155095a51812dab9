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
// chosen by the expected compile time, judged by the size of what is
// compiled (ConstraintCompiler::MissesDeferred::expected_compile_time): up
// to kQuickCompile on `compiling.quick`, longer on `compiling.slow`, so a
// small new schema does not wait for a large one to compile; and on each,
// work is due when it was queued plus its expected time (WorkQueue), so a
// smaller one passes larger ones queued shortly before it.
//
// `wanted()` is asked before each run of work(): a request whose client went
// is not planned, or compiled, for no one. deliver(result) runs on the
// thread that ran work() to its end. The returned function withdraws the
// request (any thread, any number of times): it leaves the queue it waits
// in, and work not started does not run; work running goes on, and its
// result is delivered (the caller drops it).
//
// Thread-safety: as WorkQueue::submit; work, wanted and deliver are copied
// into the jobs and may run on any of the queues' threads (work twice).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
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
// milliseconds, the costliest small ones seen in 150 ms).
inline constexpr std::chrono::milliseconds kQuickCompile{200};

template <class Work, class Wanted, class Deliver>
std::function<void()> plan_in_lanes(WorkQueue& planner, CompilingLanes compiling, Work work, Wanted wanted,
                                    Deliver deliver) {
  // Where the request waits, for the withdrawal: the planner's queue, then a
  // lane's (the planning job puts it there).
  struct Place {
    std::mutex mutex;
    bool withdrawn = false;
    std::function<void()> leave_planner, leave_lane;
  };
  auto place = std::make_shared<Place>();
  auto leave = planner.submit([place, compiling, work = std::move(work), wanted = std::move(wanted),
                               deliver = std::move(deliver)] {
    if (!wanted()) return;
    std::chrono::nanoseconds expected;
    {
      ConstraintCompiler::MissesDeferred misses;
      auto result = work();
      if (!misses.deferred()) return deliver(std::move(result));
      expected = misses.expected_compile_time();
    }
    std::lock_guard lock(place->mutex);
    if (place->withdrawn) return;
    place->leave_lane = (expected <= kQuickCompile ? compiling.quick : compiling.slow)
                            .submit(
                                [work, wanted, deliver] {
                                  if (wanted()) deliver(work());
                                },
                                expected);
  });
  {
    std::lock_guard lock(place->mutex);
    place->leave_planner = std::move(leave);
  }
  return [place] {
    std::function<void()> leave_planner, leave_lane;
    {
      std::lock_guard lock(place->mutex);
      place->withdrawn = true;
      leave_planner = place->leave_planner;
      leave_lane = place->leave_lane;
    }
    // Outside the lock: leaving takes the queue's (which the planning job
    // takes under this one).
    if (leave_planner) leave_planner();
    if (leave_lane) leave_lane();
  };
}

}  // namespace conveyor::http
