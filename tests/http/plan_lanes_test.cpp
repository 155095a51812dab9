// plan_in_lanes (http/plan_lanes.hpp): a request whose grammar the cache
// lacks is planned again on a compiling thread; the requests behind it on
// the planning thread go on meanwhile, and small new grammars do not wait
// for large ones; a request no longer wanted is not planned, or compiled,
// for no one.
//
// The state the jobs use is declared before the queues, and the planning
// queue last: on a failed assertion the queues are joined (planner first,
// whose jobs submit to the compiling lanes) while it is still there.
#include "http/plan_lanes.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "grammar/regex.hpp"
#include "tests/http/constraint_fixtures.hpp"

namespace conveyor::http {
namespace {

using testing::binder;
using testing::regex;

// Long enough for any machine; a broken lane fails instead of hanging.
template <class Future>
bool ready(Future& f) {
  return f.wait_for(std::chrono::seconds(60)) == std::future_status::ready;
}

// Whether every job queued on `queue` so far has run (one thread: in the
// order they are due; this one is due after them).
bool drained(WorkQueue& queue) {
  auto done = std::make_shared<std::promise<void>>();
  auto future = done->get_future();
  queue.submit([done] { done->set_value(); }, std::chrono::hours(1));
  return ready(future);
}

// Frees a job that holds a queue's thread until told; a failed assertion
// frees it too, before the queues join their threads.
struct Release {
  std::promise<void>& promise;
  bool done = false;
  void operator()() {
    done = true;
    promise.set_value();
  }
  ~Release() {
    if (!done) promise.set_value();
  }
};

TEST(PlanLanes, AMissIsPlannedAgainOnTheCompilingThread) {
  ConstraintCompiler constraints(binder());
  std::mutex mutex;
  std::vector<std::thread::id> runs;
  WorkQueue quick(1), compiler(1), planner(1);
  const auto plan = [&](std::string pattern) {
    auto delivered = std::make_shared<std::promise<std::pair<bool, std::thread::id>>>();
    auto future = delivered->get_future();
    plan_in_lanes(
        planner, CompilingLanes{quick, compiler},
        [&, pattern] {
          std::lock_guard lock(mutex);
          runs.push_back(std::this_thread::get_id());
          return constraints.compile(regex(pattern));
        },
        [] { return true; },
        [delivered](ConstraintResult r) {
          delivered->set_value({std::holds_alternative<GrammarConstraint>(r), std::this_thread::get_id()});
        });
    if (!ready(future)) {
      ADD_FAILURE() << "not delivered";
      return std::pair<bool, std::thread::id>{};
    }
    return future.get();
  };
  const auto [compiled, on] = plan("a+");
  EXPECT_TRUE(compiled);
  ASSERT_EQ(runs.size(), 2u);  // planned, deferred, planned again
  EXPECT_NE(runs[0], runs[1]);
  EXPECT_EQ(on, runs[1]);
  EXPECT_EQ(constraints.figures().compiled, 1u);
  runs.clear();
  const auto [again, on_planner] = plan("a+");  // cached: planned once, on the planning thread
  EXPECT_TRUE(again);
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(on_planner, runs[0]);
  EXPECT_EQ(constraints.figures().compiled, 1u);
}

TEST(PlanLanes, ALongCompileHoldsUpNoOneAndAWithdrawnRequestIsNotCompiled) {
  ConstraintCompiler constraints(binder());
  std::promise<void> compiling, release, deferred;
  std::shared_future<void> released = release.get_future().share();
  std::promise<bool> slow_done;
  std::promise<int> plain;
  std::atomic<bool> wanted{true}, delivered{false};
  std::atomic<int> planned{0};
  WorkQueue quick(1), compiler(1), planner(1);
  Release let_go{release};

  plan_in_lanes(
      planner, CompilingLanes{quick, compiler},
      [&] {
        return constraints.compile_grammar(
            "slow",
            [&] {
              compiling.set_value();
              released.wait();  // the compiling thread is busy until the test says
              return grammar::grammar_from_regex("s+");
            },
            "tools");
      },
      [] { return true; },
      [&](ConstraintResult r) { slow_done.set_value(std::holds_alternative<GrammarConstraint>(r)); });
  auto compile_started = compiling.get_future();
  ASSERT_TRUE(ready(compile_started));

  // A plain request behind it is planned and delivered meanwhile.
  plan_in_lanes(
      planner, CompilingLanes{quick, compiler}, [] { return 7; }, [] { return true; },
      [&](int v) { plain.set_value(v); });
  auto plain_done = plain.get_future();
  ASSERT_TRUE(ready(plain_done));
  EXPECT_EQ(plain_done.get(), 7);

  // A request with another new grammar waits for the compiling thread; its
  // client goes meanwhile: it is not compiled, nor delivered.
  plan_in_lanes(
      planner, CompilingLanes{quick, compiler},
      [&] {
        if (planned++ == 0) deferred.set_value();
        return constraints.compile(regex("c+"));
      },
      [&] { return wanted.load(); }, [&](ConstraintResult) { delivered = true; });
  auto was_deferred = deferred.get_future();
  ASSERT_TRUE(ready(was_deferred));
  ASSERT_TRUE(drained(planner));
  wanted = false;
  let_go();
  auto slow = slow_done.get_future();
  ASSERT_TRUE(ready(slow));
  EXPECT_TRUE(slow.get());
  ASSERT_TRUE(drained(quick));  // both small: the quick lane's
  EXPECT_EQ(planned.load(), 1);  // on the planning thread only
  EXPECT_FALSE(delivered);
  EXPECT_EQ(constraints.figures().compiled, 1u);  // the slow one alone
}

// A small new grammar compiles on the quick lane while a large one compiles
// on the slow lane; on a lane, a smaller grammar passes a larger one queued
// just before it (WorkQueue's due order; the expected times from the keys).
TEST(PlanLanes, ASmallNewGrammarWaitsForNoLargeOne) {
  ConstraintCompiler constraints(binder());
  std::promise<void> busy, release, small_done;
  std::shared_future<void> released = release.get_future().share();
  std::mutex mutex;
  std::vector<std::string> delivered;
  WorkQueue quick(1), slow(1), planner(1);
  Release let_go{release};
  slow.submit([&] {  // a large compile under way
    busy.set_value();
    released.wait();
  });
  auto slow_busy = busy.get_future();
  ASSERT_TRUE(ready(slow_busy));
  const auto plan = [&](std::string key) {
    plan_in_lanes(
        planner, CompilingLanes{quick, slow},
        [&constraints, key] {
          return constraints.compile_grammar(key, [] { return grammar::grammar_from_regex("k+"); }, "response_format");
        },
        [] { return true; },
        [&, key](ConstraintResult) {
          std::lock_guard lock(mutex);
          delivered.push_back(key.substr(0, 5));
          if (key == "small") small_done.set_value();
        });
  };
  plan("huge " + std::string(size_t(1) << 16, 'x'));  // expected 2 s, the most
  plan("large" + std::string(size_t(1) << 12, 'x'));  // about 0.4 s
  plan("small");
  auto small = small_done.get_future();
  ASSERT_TRUE(ready(small));  // while the slow lane is still busy
  let_go();
  ASSERT_TRUE(drained(slow));
  EXPECT_EQ(delivered, (std::vector<std::string>{"small", "large", "huge "}));
}

// A withdrawn request leaves the queue it waits in at once, and what its
// work holds (the request) with it; its work never runs.
TEST(PlanLanes, AWithdrawnRequestLeavesItsQueue) {
  ConstraintCompiler constraints(binder());
  std::promise<void> busy, release;
  std::shared_future<void> released = release.get_future().share();
  auto held = std::make_shared<int>(0);  // what the work holds
  std::atomic<int> runs{0};
  WorkQueue quick(1), slow(1), planner(1);
  Release let_go{release};
  quick.submit([&] {
    busy.set_value();
    released.wait();
  });
  auto quick_busy = busy.get_future();
  ASSERT_TRUE(ready(quick_busy));
  auto withdraw = plan_in_lanes(
      planner, CompilingLanes{quick, slow},
      [&constraints, &runs, held] {
        ++runs;
        return constraints.compile(regex("w+"));
      },
      [] { return true; }, [](ConstraintResult) { ADD_FAILURE() << "delivered"; });
  ASSERT_TRUE(drained(planner));  // planned once, deferred: now in the quick lane
  EXPECT_EQ(runs.load(), 1);
  EXPECT_GT(held.use_count(), 1);
  withdraw();
  EXPECT_EQ(held.use_count(), 1);  // gone from the lane while the lane is still busy
  withdraw();                      // again: nothing
  let_go();
  ASSERT_TRUE(drained(quick));
  EXPECT_EQ(runs.load(), 1);
  EXPECT_EQ(constraints.figures().compiled, 0u);
}

TEST(PlanLanes, ARequestNotWantedIsNotPlanned) {
  std::atomic<int> runs{0};
  WorkQueue quick(1), compiler(1), planner(1);
  plan_in_lanes(
      planner, CompilingLanes{quick, compiler}, [&] { return ++runs; }, [] { return false; },
      [](int) { ADD_FAILURE(); });
  EXPECT_TRUE(drained(planner));
  EXPECT_TRUE(drained(quick));
  EXPECT_TRUE(drained(compiler));
  EXPECT_EQ(runs.load(), 0);
}

}  // namespace
}  // namespace conveyor::http
