// plan_in_lanes (http/plan_lanes.hpp): a request whose grammar the cache
// lacks is planned again on the compiling thread; the requests behind it on
// the planning thread go on meanwhile; a request no longer wanted is not
// compiled for no one.
#include "http/plan_lanes.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "grammar/regex.hpp"
#include "model/formats/dummy.hpp"

namespace conveyor::http {
namespace {

using namespace std::chrono_literals;

std::shared_ptr<GrammarBinder> binder() {
  std::shared_ptr<const Tokenizer> bytes = make_byte_tokenizer();
  return std::make_shared<GrammarBinder>(bytes, std::vector<int32_t>{bytes->eos_id()});
}

OutputConstraint regex(std::string pattern) {
  OutputConstraint c;
  c.kind = OutputConstraint::Kind::regex;
  c.source = std::move(pattern);
  c.field = "structured_outputs";
  return c;
}

// Waits for every job queued on `queue` so far (one thread: in order).
void drain(WorkQueue& queue) {
  std::promise<void> done;
  queue.submit([&done] { done.set_value(); });
  done.get_future().wait();
}

TEST(PlanLanes, AMissIsPlannedAgainOnTheCompilingThread) {
  WorkQueue planner(1), compiler(1);
  ConstraintCompiler constraints(binder());
  std::mutex mutex;
  std::vector<std::thread::id> runs;
  const auto plan = [&](std::string pattern) {
    std::promise<std::pair<bool, std::thread::id>> delivered;
    auto future = delivered.get_future();
    plan_in_lanes(
        planner, compiler,
        [&, pattern] {
          std::lock_guard lock(mutex);
          runs.push_back(std::this_thread::get_id());
          return constraints.compile(regex(pattern));
        },
        [] { return true; },
        [&delivered](ConstraintResult r) {
          delivered.set_value({std::holds_alternative<GrammarConstraint>(r), std::this_thread::get_id()});
        });
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
  WorkQueue planner(1), compiler(1);
  ConstraintCompiler constraints(binder());
  std::promise<void> compiling, release;
  std::shared_future<void> released = release.get_future().share();
  struct Release {  // a failed assertion still frees the compiling thread (the queues' destructors join it)
    std::promise<void>& promise;
    bool done = false;
    void operator()() {
      done = true;
      promise.set_value();
    }
    ~Release() {
      if (!done) promise.set_value();
    }
  } let_go{release};
  std::promise<bool> slow_done;
  plan_in_lanes(
      planner, compiler,
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
      [] { return true; }, [&](ConstraintResult r) { slow_done.set_value(std::holds_alternative<GrammarConstraint>(r)); });
  compiling.get_future().wait();

  // A plain request behind it is planned and delivered meanwhile.
  std::promise<int> plain;
  plan_in_lanes(planner, compiler, [] { return 7; }, [] { return true; }, [&](int v) { plain.set_value(v); });
  auto plain_done = plain.get_future();
  ASSERT_EQ(plain_done.wait_for(60s), std::future_status::ready);
  EXPECT_EQ(plain_done.get(), 7);

  // A request with another new grammar waits for the compiling thread; its
  // client goes meanwhile: it is not compiled, nor delivered.
  std::atomic<bool> wanted{true};
  std::atomic<int> planned{0};
  std::atomic<bool> delivered{false};
  std::promise<void> deferred;
  plan_in_lanes(
      planner, compiler,
      [&] {
        if (planned++ == 0) deferred.set_value();
        return constraints.compile(regex("c+"));
      },
      [&] { return wanted.load(); }, [&](ConstraintResult) { delivered = true; });
  deferred.get_future().wait();
  drain(planner);
  wanted = false;
  let_go();
  auto slow = slow_done.get_future();
  ASSERT_EQ(slow.wait_for(60s), std::future_status::ready);
  EXPECT_TRUE(slow.get());
  drain(compiler);
  EXPECT_EQ(planned.load(), 1);  // on the planning thread only
  EXPECT_FALSE(delivered);
  EXPECT_EQ(constraints.figures().compiled, 1u);  // the slow one alone
}

TEST(PlanLanes, ARequestNotWantedIsNotPlanned) {
  WorkQueue planner(1), compiler(1);
  std::atomic<int> runs{0};
  plan_in_lanes(planner, compiler, [&] { return ++runs; }, [] { return false; }, [](int) { FAIL(); });
  drain(planner);
  drain(compiler);
  EXPECT_EQ(runs.load(), 0);
}

// An ask the compilers refuse is kept: asked again, it is answered on the
// planning thread, naming the field it came from this time.
TEST(PlanLanes, ARefusalIsKeptAndAnsweredWithoutTheCompilingThread) {
  ConstraintCompiler constraints(binder());
  OutputConstraint bad = regex("(unclosed");
  const auto first = constraints.compile(bad);
  ASSERT_TRUE(std::holds_alternative<ApiError>(first));
  EXPECT_EQ(std::get<ApiError>(first).status, 400);
  ConstraintCompiler::MissesDeferred misses;
  bad.field = "response_format";
  const auto again = constraints.compile(bad);
  EXPECT_FALSE(misses.deferred());
  ASSERT_TRUE(std::holds_alternative<ApiError>(again));
  const ApiError& e = std::get<ApiError>(again);
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.param, "response_format");
  EXPECT_TRUE(e.message.starts_with("response_format: ")) << e.message;
  EXPECT_EQ(e.message.substr(e.message.find(": ")), std::get<ApiError>(first).message.substr(
                                                         std::get<ApiError>(first).message.find(": ")));
  EXPECT_EQ(constraints.figures().grammars, 0u);  // a refusal is no grammar
  EXPECT_EQ(constraints.figures().hits, 1u);
}

}  // namespace
}  // namespace conveyor::http
