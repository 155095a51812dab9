// The engine summary line: rates since the previous line, and silence while
// the engine stays idle.
#include "http/engine_summary.hpp"

#include <gtest/gtest.h>

#include <variant>

namespace conveyor::http {
namespace {

using Clock = EngineSummary::Clock;

const LogValue& field(const LogFields& fields, std::string_view key) {
  for (const LogField& f : fields) {
    if (f.key == key) return f.value;
  }
  static const LogValue none;
  ADD_FAILURE() << "no field " << key;
  return none;
}

EngineStats stats(int32_t running, int32_t waiting, uint64_t generated, uint64_t prompt, int32_t used_blocks) {
  EngineStats s;
  s.num_running = running;
  s.num_waiting = waiting;
  s.generated_tokens = generated;
  s.prompt_tokens = prompt;
  s.blocks.total = 100;
  s.blocks.used = used_blocks;
  return s;
}

TEST(EngineSummary, RatesAreSinceThePreviousLine) {
  const Clock::time_point t0 = Clock::now();
  EngineSummary summary(t0);
  auto first = summary.next(stats(2, 1, 100, 40, 25), 3, t0 + std::chrono::seconds(10));
  ASSERT_TRUE(first);
  EXPECT_EQ(std::get<int64_t>(field(*first, "running")), 2);
  EXPECT_EQ(std::get<int64_t>(field(*first, "waiting")), 1);
  EXPECT_EQ(std::get<int64_t>(field(*first, "requests_in_flight")), 3);
  EXPECT_DOUBLE_EQ(std::get<double>(field(*first, "kv_usage")), 0.25);
  EXPECT_DOUBLE_EQ(std::get<double>(field(*first, "generation_tokens_per_s")), 10.0);  // since the start

  auto second = summary.next(stats(2, 0, 600, 140, 30), 2, t0 + std::chrono::seconds(20));
  ASSERT_TRUE(second);
  EXPECT_DOUBLE_EQ(std::get<double>(field(*second, "generation_tokens_per_s")), 50.0);
  EXPECT_DOUBLE_EQ(std::get<double>(field(*second, "prompt_tokens_per_s")), 10.0);
}

TEST(EngineSummary, AnIdleEngineWritesOneLineThenNone) {
  const Clock::time_point t0 = Clock::now();
  EngineSummary summary(t0);
  EXPECT_FALSE(summary.next(stats(0, 0, 0, 0, 0), 0, t0));  // idle from the start
  // Work that came and went between two lines still shows.
  EXPECT_TRUE(EngineSummary(t0).next(stats(0, 0, 3, 2, 0), 0, t0 + std::chrono::seconds(1)).has_value());
  EXPECT_TRUE(summary.next(stats(1, 0, 10, 5, 1), 1, t0 + std::chrono::seconds(1)));
  // Work finished since: this line shows it (the rate, the empty queues) ...
  auto drop = summary.next(stats(0, 0, 30, 5, 0), 0, t0 + std::chrono::seconds(2));
  ASSERT_TRUE(drop);
  EXPECT_DOUBLE_EQ(std::get<double>(field(*drop, "generation_tokens_per_s")), 20.0);
  // ... the next says the engine is idle, and then nothing until work comes.
  EXPECT_TRUE(summary.next(stats(0, 0, 30, 5, 0), 0, t0 + std::chrono::seconds(3)));
  EXPECT_FALSE(summary.next(stats(0, 0, 30, 5, 0), 0, t0 + std::chrono::seconds(4)));
  EXPECT_TRUE(summary.next(stats(0, 1, 30, 9, 0), 1, t0 + std::chrono::seconds(5)));
}

}  // namespace
}  // namespace conveyor::http
