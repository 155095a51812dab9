#include "engine/step_cost.hpp"

#include <gtest/gtest.h>

#include <random>

namespace conveyor {
namespace {

// A machine whose steps cost 3 ms + 0.2 ms per decode token + 0.5 ms per
// prefill token, with ±5% noise.
double machine(int32_t d, int32_t p, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> noise(0.95, 1.05);
  return (3e-3 + 2e-4 * d + 5e-4 * p) * noise(rng);
}

TEST(StepCostModel, LearnsTheCostsOfDecodeAndPrefill) {
  StepCostModel m;
  std::mt19937_64 rng(1);
  for (int i = 0; i < 400; ++i) {
    const int32_t d = 1 + int32_t(rng() % 32);
    const int32_t p = i % 3 == 0 ? 16 + int32_t(rng() % 200) : 0;
    m.observe(d, p, machine(d, p, rng));
  }
  EXPECT_NEAR(m.predict(8, 0), 3e-3 + 8 * 2e-4, 3e-4);
  EXPECT_NEAR(m.predict(20, 100), 3e-3 + 20 * 2e-4 + 100 * 5e-4, 3e-3);
  EXPECT_NEAR(m.prefill_seconds_per_token(), 5e-4, 5e-5);
  // 25 ms with 10 decodes: (25 - 5) / 0.5 = 40 prefill tokens.
  EXPECT_NEAR(m.prefill_allowance(10, 25e-3, 16), 40, 5);
}

TEST(StepCostModel, PriorUntilSeenAndAFloor) {
  StepCostModel m;
  EXPECT_DOUBLE_EQ(m.prefill_seconds_per_token(), StepCostModel::kPriorPrefill);
  EXPECT_EQ(m.prefill_allowance(4, 1e-3, 16), 16);   // decodes alone exceed the target
  EXPECT_EQ(m.prefill_allowance(4, 1e7, 16), 1000000000);  // capped, no overflow
  m.observe(0, 0, 1.0);                               // nothing computed: ignored
  m.observe(4, 0, -1.0);                              // not a time: ignored
  m.observe(4, 0, std::numeric_limits<double>::quiet_NaN());
  EXPECT_DOUBLE_EQ(m.predict(4, 0), StepCostModel::kPriorBase + 4 * StepCostModel::kPriorDecode);
}

TEST(StepCostModel, FollowsAChangeInCost) {
  StepCostModel m;
  std::mt19937_64 rng(2);
  for (int i = 0; i < 300; ++i) {
    const int32_t d = 1 + int32_t(rng() % 16), p = i % 2 ? 64 : 0;
    m.observe(d, p, machine(d, p, rng));
  }
  const double before = m.prefill_seconds_per_token();
  for (int i = 0; i < 300; ++i) {  // the machine gets twice as slow (neighbours)
    const int32_t d = 1 + int32_t(rng() % 16), p = i % 2 ? 64 : 0;
    m.observe(d, p, 2 * machine(d, p, rng));
  }
  EXPECT_NEAR(m.prefill_seconds_per_token() / before, 2.0, 0.2);
}

}  // namespace
}  // namespace conveyor
