#include "policies/preemption.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace conveyor {
namespace {

std::vector<uint64_t> victim_ids(const PreemptionDecision& d) {
  std::vector<uint64_t> out;
  for (const Victim& v : d.victims) out.push_back(v.seq);
  return out;
}

// id, priority, arrival, blocks_held, tokens_to_recompute, blocks_to_copy
PreemptionQuery sample_query(int32_t shortfall, int32_t host_free) {
  PreemptionQuery q;
  q.shortfall = shortfall;
  q.free_host_blocks = host_free;
  q.running = {
      {1, -1, 10, 4, 64, 4},
      {2, 0, 11, 2, 32, 2},
      {3, 0, 15, 3, 48, 3},
      {4, -2, 20, 5, 80, 5},
      {5, -1, 30, 1, 16, 1},
  };
  return q;
}

TEST(Preemption, ParsesItsNames) {
  EXPECT_EQ(*parse_preemption_mode("recompute"), PreemptionMode::recompute);
  EXPECT_EQ(*parse_preemption_mode("swap"), PreemptionMode::swap);
  EXPECT_EQ(*parse_preemption_mode("cost"), PreemptionMode::cost);
  auto bad = parse_preemption_mode("lru");
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.error().message.find("unknown preemption policy 'lru'"), std::string::npos);
  EXPECT_STREQ(to_string(PreemptionMode::cost), "cost");
}

TEST(Preemption, LeastUrgentThenLatestArrivalUntilCovered) {
  PreemptionPolicy policy(PreemptionMode::recompute);
  // Lower priority values run sooner (vLLM), so the largest goes first.
  // Order: 3 (p0, latest), 2 (p0), 5 (p-1, latest), 1 (p-1), 4 (p-2).
  PreemptionDecision d = policy(sample_query(4, 0));
  EXPECT_EQ(victim_ids(d), (std::vector<uint64_t>{3, 2}));
  EXPECT_EQ(d.blocks_released, 5);
  EXPECT_TRUE(d.covers_shortfall);
  for (const Victim& v : d.victims) EXPECT_EQ(v.mode, PreemptionMode::recompute);

  d = policy(sample_query(6, 0));
  EXPECT_EQ(victim_ids(d), (std::vector<uint64_t>{3, 2, 5}));

  d = policy(sample_query(100, 0));  // not enough even with everyone
  EXPECT_EQ(victim_ids(d), (std::vector<uint64_t>{3, 2, 5, 1, 4}));
  EXPECT_EQ(d.blocks_released, 15);
  EXPECT_FALSE(d.covers_shortfall);

  d = policy(sample_query(0, 0));
  EXPECT_TRUE(d.victims.empty());
  EXPECT_TRUE(d.covers_shortfall);
}

TEST(Preemption, AtLeastMinVictimsWhenAWaitingRequestNeedsASlot) {
  PreemptionPolicy policy(PreemptionMode::recompute);
  PreemptionQuery q = sample_query(0, 0);
  q.min_victims = 2;  // no blocks missing, but two slots
  PreemptionDecision d = policy(q);
  EXPECT_EQ(victim_ids(d), (std::vector<uint64_t>{3, 2}));
  EXPECT_TRUE(d.covers_shortfall);
  q.shortfall = 6;  // both conditions: blocks decide here
  EXPECT_EQ(victim_ids(policy(q)), (std::vector<uint64_t>{3, 2, 5}));
  q.shortfall = 0;
  q.min_victims = 9;  // more than there are
  d = policy(q);
  EXPECT_EQ(d.victims.size(), 5u);
  EXPECT_FALSE(d.covers_shortfall);
}

TEST(Preemption, CandidatesThatFreeNothingAreSkipped) {
  PreemptionPolicy policy;
  PreemptionQuery q;
  q.shortfall = 1;
  q.running = {{1, 0, 5, 0, 10, 3}, {2, 5, 1, 2, 10, 2}};
  EXPECT_EQ(victim_ids(policy(q)), (std::vector<uint64_t>{2}));
}

TEST(Preemption, SwapFallsBackToRecomputeWhenHostIsFull) {
  PreemptionPolicy policy(PreemptionMode::swap);
  // Host space 4: victim 3 (3 blocks) swaps, victim 2 (2 blocks) no longer
  // fits, victim 5 (1 block) still does.
  PreemptionDecision d = policy(sample_query(6, 4));
  ASSERT_EQ(victim_ids(d), (std::vector<uint64_t>{3, 2, 5}));
  EXPECT_EQ(d.victims[0].mode, PreemptionMode::swap);
  EXPECT_EQ(d.victims[1].mode, PreemptionMode::recompute);
  EXPECT_EQ(d.victims[2].mode, PreemptionMode::swap);
}

TEST(Preemption, CostModeChoosesTheCheaperPerVictim) {
  PreemptionCosts costs;
  costs.recompute_seconds_per_token = 1e-5;
  costs.copy_seconds_per_block = 1e-3;
  PreemptionPolicy policy(PreemptionMode::cost, costs);
  PreemptionQuery q;
  q.shortfall = 4;
  q.free_host_blocks = 100;
  // Short history: recompute 16 tokens = 1.6e-4 s < swap 2 * 1 block = 2e-3 s.
  // Long history with few blocks of its own: recompute 2000 tokens = 2e-2 s >
  // swap 2 * 2 blocks = 4e-3 s.
  q.running = {{1, 0, 2, 1, 16, 1}, {2, 0, 1, 3, 2000, 2}};
  PreemptionDecision d = policy(q);
  ASSERT_EQ(victim_ids(d), (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(d.victims[0].mode, PreemptionMode::recompute);
  EXPECT_EQ(d.victims[1].mode, PreemptionMode::swap);

  q.free_host_blocks = 1;  // the swap does not fit: recompute
  d = policy(q);
  EXPECT_EQ(d.victims[1].mode, PreemptionMode::recompute);
}

TEST(Preemption, CostModelFollowsMeasurements) {
  PreemptionPolicy policy(PreemptionMode::cost, {1e-5, 1e-5});
  for (int i = 0; i < 100; ++i) policy.observe_copy(10, 10 * 1e-3);  // 1 ms per block
  EXPECT_NEAR(policy.costs().copy_seconds_per_block, 1e-3, 1e-6);
  policy.observe_copy(0, 5.0);    // ignored
  policy.observe_copy(10, -1.0);  // ignored
  EXPECT_NEAR(policy.costs().copy_seconds_per_block, 1e-3, 1e-6);
  for (int i = 0; i < 100; ++i) policy.observe_recompute(100, 100 * 2e-4);
  EXPECT_NEAR(policy.costs().recompute_seconds_per_token, 2e-4, 1e-7);
  // Now copying one block (2 ms both ways) beats recomputing 16 tokens (3.2 ms).
  PreemptionQuery q;
  q.shortfall = 1;
  q.free_host_blocks = 10;
  q.running = {{1, 0, 0, 1, 16, 1}};
  EXPECT_EQ(policy(q).victims.at(0).mode, PreemptionMode::swap);
}

}  // namespace
}  // namespace conveyor
