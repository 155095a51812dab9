// The priority scheduling policy through the whole actor engine on
// stories260K: vLLM's direction (lower runs sooner), preemption of less
// urgent running streams by an urgent request that finds every slot taken,
// by recompute and by swap, with every stream's tokens exactly those of an
// undisturbed run; and fcfs refusing a priority.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "tests/actors/engine_test_util.hpp"
#include "tests/actors/fake_engine.hpp"
#include "tests/actors/stories_fixture.hpp"

namespace conveyor {
namespace {

using testing::Collector;
using testing::EngineSystemConfig;
using testing::Outcome;

class Priority : public testing::StoriesTest {
 protected:
  static constexpr int32_t kLong = 300;  // tokens of each long stream
  static constexpr int32_t kShort = 12;  // tokens of the urgent request

  static RequestSpec spec(request_id id, std::vector<int32_t> prompt, int32_t max_tokens, int32_t priority) {
    RequestSpec s = testing::greedy_spec(id, std::move(prompt), max_tokens, /*ignore_eos=*/true);
    s.request.priority = priority;
    return s;
  }

  // An engine on stories260K with one compute thread and `policy`, in this
  // test's actor system.
  std::unique_ptr<Engine> engine(SchedulingPolicy policy, int32_t max_num_seqs = 256,
                                 PreemptionMode mode = PreemptionMode::recompute) {
    EngineConfig config;
    config.threads = 1;
    config.scheduling_policy = policy;
    config.max_num_seqs = max_num_seqs;
    config.preemption = mode;
    config.swap_space_tokens = 16 * 64;
    auto e = Engine::create(sys_, config, *model_);
    EXPECT_TRUE(e.has_value()) << e.error().message;
    return e ? std::move(*e) : nullptr;
  }

  // Each prompt alone (nothing to preempt): the reference tokens.
  std::vector<int32_t> alone(const std::vector<int32_t>& prompt, int32_t max_tokens) {
    auto e = engine(SchedulingPolicy::fcfs);
    Collector c;
    e->submit(testing::greedy_spec(1, prompt, max_tokens, true), c.callback_for(1));
    EXPECT_TRUE(c.wait_for(1));
    return c.outcomes().at(1).tokens;
  }

  EngineSystemConfig cfg_;
  caf::actor_system sys_{cfg_};
};

const std::vector<int32_t> kLongA = {1, 400, 300, 20, 7};
const std::vector<int32_t> kLongB = {1, 250, 12, 99, 5, 3};
const std::vector<int32_t> kUrgent = {1, 77, 31, 8};

TEST_F(Priority, AnUrgentRequestPreemptsALessUrgentStreamAndNobodyLosesAToken) {
  const std::vector<int32_t> ref_a = alone(kLongA, kLong), ref_b = alone(kLongB, kLong),
                             ref_urgent = alone(kUrgent, kShort);
  for (PreemptionMode mode : {PreemptionMode::recompute, PreemptionMode::swap}) {
    auto engine = this->engine(SchedulingPolicy::priority, /*max_num_seqs=*/2, mode);  // both slots: the streams
    ASSERT_NE(engine, nullptr);
    Collector streams;
    engine->submit(spec(1, kLongA, kLong, 5), streams.callback_for(1));
    engine->submit(spec(2, kLongB, kLong, 5), streams.callback_for(2));
    // Wait until both stream (they hold both slots).
    for (int i = 0; i < 2000; ++i) {
      const auto o = streams.outcomes();
      if (o.count(1) && o.count(2) && !o.at(1).tokens.empty() && !o.at(2).tokens.empty()) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    // The urgent request's last event records how far the streams had got:
    // without preemption it could only start once one of them had ended.
    std::atomic<size_t> a_at_end{0}, b_at_end{0};
    std::atomic<int> a_done_at_end{-1}, b_done_at_end{-1};
    Collector urgent;
    EventCallback inner = urgent.callback_for(3);
    engine->submit(spec(3, kUrgent, kShort, 0), [&](const StreamEvent& e) {
      if (e.last()) {
        const auto o = streams.outcomes();
        a_at_end = o.at(1).tokens.size();
        b_at_end = o.at(2).tokens.size();
        a_done_at_end = o.at(1).finals;
        b_done_at_end = o.at(2).finals;
      }
      inner(e);
    });
    ASSERT_TRUE(urgent.wait_for(1));
    ASSERT_TRUE(streams.wait_for(2));
    EXPECT_EQ(a_done_at_end.load(), 0) << to_string(mode) << ": the urgent request waited for a stream to end";
    EXPECT_EQ(b_done_at_end.load(), 0) << to_string(mode) << ": the urgent request waited for a stream to end";
    EXPECT_LT(a_at_end.load() + b_at_end.load(), size_t(2 * kLong));
    auto stats = engine->stats();
    ASSERT_TRUE(stats.has_value());
    EXPECT_GE(mode == PreemptionMode::swap ? stats->preemptions_swap : stats->preemptions_recompute, 1u)
        << to_string(mode);
    const Outcome u = urgent.outcomes().at(3);
    EXPECT_EQ(u.finish, FinishReason::length) << u.message;
    EXPECT_EQ(u.tokens, ref_urgent) << to_string(mode);
    EXPECT_EQ(streams.outcomes().at(1).tokens, ref_a) << to_string(mode);
    EXPECT_EQ(streams.outcomes().at(2).tokens, ref_b) << to_string(mode);
    testing::expect_all_blocks_free(*engine);
  }
}

// vLLM's direction in the queue: with one slot busy, of two waiting
// requests the one with the lower value runs first.
TEST_F(Priority, TheLowerValueRunsFirst) {
  auto engine = this->engine(SchedulingPolicy::priority, /*max_num_seqs=*/1);
  ASSERT_NE(engine, nullptr);
  std::mutex mutex;
  std::vector<request_id> finished;
  Collector all;
  auto record = [&](request_id id) {
    EventCallback inner = all.callback_for(id);
    return [&, id, inner](const StreamEvent& e) {
      if (e.last()) {
        std::lock_guard lock(mutex);
        finished.push_back(id);
      }
      inner(e);
    };
  };
  // The first holds the slot (it is the most urgent, so nothing preempts
  // it) while the other two queue.
  engine->submit(spec(1, kLongA, 200, -10), record(1));
  engine->submit(spec(2, kLongB, 8, 7), record(2));
  engine->submit(spec(3, kUrgent, 8, -3), record(3));
  ASSERT_TRUE(all.wait_for(3));
  ASSERT_EQ(finished.size(), 3u);
  EXPECT_EQ(finished, (std::vector<request_id>{1, 3, 2}));
}

TEST_F(Priority, FcfsRefusesAPriorityNamingTheFlag) {
  auto engine = this->engine(SchedulingPolicy::fcfs);
  ASSERT_NE(engine, nullptr);
  Collector c;
  engine->submit(spec(1, kUrgent, 4, 1), c.callback_for(1));
  engine->submit(spec(2, kUrgent, 4, 0), c.callback_for(2));
  ASSERT_TRUE(c.wait_for(2));
  const Outcome refused = c.outcomes().at(1);
  EXPECT_EQ(refused.finish, FinishReason::error);
  EXPECT_EQ(refused.error_code, Errc::invalid_argument);
  EXPECT_NE(refused.message.find("--scheduling-policy priority"), std::string::npos) << refused.message;
  EXPECT_EQ(c.outcomes().at(2).finish, FinishReason::length);
}

}  // namespace
}  // namespace conveyor
