#include "policies/admission.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace conveyor {
namespace {

// A query over a cache of `total` blocks of 16 tokens with `free` free.
AdmissionQuery query(int32_t free, int32_t total, std::vector<AdmissionCandidate> c) {
  AdmissionQuery q;
  q.free_blocks = free;
  q.total_blocks = total;
  q.block_size = 16;
  q.num_running = 0;
  q.max_running = 64;
  q.candidates = std::move(c);
  return q;
}

// id, prompt tokens, max tokens
AdmissionCandidate cand(uint64_t id, int32_t prompt, int32_t max_tokens) {
  AdmissionCandidate c;
  c.id = id;
  c.prompt_tokens = prompt;
  c.max_tokens = max_tokens;
  c.arrival = id;
  return c;
}

TEST(Admission, ParsesItsNames) {
  EXPECT_EQ(*parse_admission_mode("conservative"), AdmissionMode::conservative);
  EXPECT_EQ(*parse_admission_mode("watermark"), AdmissionMode::watermark);
  EXPECT_EQ(*parse_admission_mode("profiled"), AdmissionMode::profiled);
  auto bad = parse_admission_mode("greedy");
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.error().message.find("unknown admission policy 'greedy'"), std::string::npos);
  for (const char* name : {"conservative", "watermark", "profiled"}) {
    auto p = make_admission_policy(name);
    ASSERT_TRUE(p.has_value()) << name;
    EXPECT_STREQ(to_string((*p)->mode()), name);
  }
  EXPECT_FALSE(make_admission_policy("").has_value());
}

TEST(Admission, ConservativeReservesPromptPlusMaxTokens) {
  ConservativeAdmission policy;
  // a: 100 + 60 tokens = 10 blocks; b: 16 + 16 = 2 blocks; c: 1 + 1 = 1 block.
  auto cands = std::vector<AdmissionCandidate>{cand(1, 100, 60), cand(2, 16, 16), cand(3, 1, 1)};
  AdmissionDecision d = policy(query(100, 100, cands));
  EXPECT_EQ(d.admitted, (std::vector<uint64_t>{1, 2, 3}));
  EXPECT_EQ(d.footprints, (std::vector<int32_t>{10, 2, 1}));
  EXPECT_TRUE(d.rejected.empty());

  // 11 free: a fits, b does not, and c (which would fit) waits behind b.
  d = policy(query(11, 100, cands));
  EXPECT_EQ(d.admitted, (std::vector<uint64_t>{1}));

  // Blocks owed to running requests are not available.
  AdmissionQuery q = query(11, 100, cands);
  q.reserved_blocks = 2;
  EXPECT_TRUE(policy(q).admitted.empty());
}

TEST(Admission, RejectsWhatCanNeverFitAndGoesOn) {
  ConservativeAdmission policy;
  // 1600 prompt tokens + 1 = 101 blocks > 100.
  auto cands = std::vector<AdmissionCandidate>{cand(1, 1600, 10), cand(2, 16, 16), cand(3, 0, 4)};
  AdmissionDecision d = policy(query(100, 100, cands));
  ASSERT_EQ(d.rejected.size(), 2u);
  EXPECT_EQ(d.rejected[0].first, 1u);
  EXPECT_NE(d.rejected[0].second.find("101 KV blocks"), std::string::npos);
  EXPECT_EQ(d.rejected[1].first, 3u);  // empty prompt
  EXPECT_EQ(d.admitted, (std::vector<uint64_t>{2}));
}

TEST(Admission, ConservativeCapsAtTheWholeCache) {
  ConservativeAdmission policy;
  // 100 + 100000 tokens: more than the cache, but it could still run (with
  // preemption or an early stop), so it waits for an empty cache.
  auto cands = std::vector<AdmissionCandidate>{cand(1, 100, 100000)};
  EXPECT_TRUE(policy(query(99, 100, cands)).admitted.empty());
  AdmissionDecision d = policy(query(100, 100, cands));
  EXPECT_EQ(d.admitted, (std::vector<uint64_t>{1}));
  EXPECT_EQ(d.footprints, (std::vector<int32_t>{100}));
}

TEST(Admission, StopsAtMaxRunning) {
  ConservativeAdmission policy;
  AdmissionQuery q = query(100, 100, {cand(1, 1, 1), cand(2, 1, 1), cand(3, 1, 1)});
  q.num_running = 2;
  q.max_running = 4;
  EXPECT_EQ(policy(q).admitted, (std::vector<uint64_t>{1, 2}));
}

TEST(Admission, WatermarkKeepsAReserveAfterThePrompts) {
  WatermarkAdmission policy(0.1);  // keep 10 of 100 blocks
  // Prompts of 159 tokens: 160 with the first output slot, 10 blocks each;
  // max_tokens does not count.
  auto cands = std::vector<AdmissionCandidate>{cand(1, 159, 5000), cand(2, 159, 5000),
                                               cand(3, 159, 5000)};
  AdmissionDecision d = policy(query(30, 100, cands));
  EXPECT_EQ(d.admitted, (std::vector<uint64_t>{1, 2}));  // 30 - 20 = 10 left: at the watermark
  EXPECT_EQ(d.footprints, (std::vector<int32_t>{10, 10}));
  EXPECT_TRUE(policy(query(19, 100, cands)).admitted.empty());
}

// Whatever a policy keeps free, an empty cache runs the head of the queue:
// a request whose footprint is near the whole cache would otherwise never
// start, and nothing behind it either (found by the scheduler's randomized
// workload: n = 4 samples with the profiled policy's reserve).
TEST(Admission, AnEmptyCacheAdmitsTheHeadWhateverItKeepsFree) {
  WatermarkAdmission watermark(0.1);  // keeps 10 of 100 blocks
  auto big = std::vector<AdmissionCandidate>{cand(1, 159 + 16 * 90, 10), cand(2, 1, 1)};  // 100 blocks
  EXPECT_EQ(watermark(query(100, 100, big)).admitted, (std::vector<uint64_t>{1}));
  EXPECT_TRUE(watermark(query(99, 100, big)).admitted.empty());  // not empty: it waits
  AdmissionQuery running = query(100, 100, big);
  running.num_running = 1;
  EXPECT_TRUE(watermark(running).admitted.empty());
  AdmissionConfig config;
  config.min_observations = 1;
  ProfiledAdmission profiled(config);
  profiled.record_finished(40);
  AdmissionCandidate samples = cand(3, 27, 33);
  samples.num_samples = 4;  // 27 + 4 x 33 tokens, and 3 copied blocks: 13, above 13 - 1 kept
  EXPECT_EQ(profiled(query(13, 13, {samples})).admitted, (std::vector<uint64_t>{3}));
}

TEST(Admission, ProfiledActsConservativeUntilWarmedUp) {
  AdmissionConfig config;
  config.min_observations = 10;
  config.percentile = 0.9;
  config.reserve_fraction = 0.1;
  ProfiledAdmission policy(config);
  ConservativeAdmission conservative;
  auto cands = std::vector<AdmissionCandidate>{cand(1, 16, 1000), cand(2, 16, 1000),
                                               cand(3, 16, 1000)};
  AdmissionQuery q = query(140, 200, cands);  // 1016 tokens = 64 blocks each
  EXPECT_EQ(policy(q).admitted, conservative(q).admitted);
  EXPECT_EQ(policy(q).admitted.size(), 2u);
  EXPECT_EQ(policy.predicted_output(1000), -1);

  // Outputs are short: 90% are 20 tokens.
  for (int i = 0; i < 90; ++i) policy.record_finished(20);
  for (int i = 0; i < 10; ++i) policy.record_finished(700);
  int32_t predicted = policy.predicted_output(1000);
  EXPECT_GE(predicted, 20);
  EXPECT_LE(predicted, 23);  // a bucket bound: at most 12.5% above
  EXPECT_EQ(policy.predicted_output(8), 8);  // never above max_tokens
  // Now each needs (16 + 23) / 16 -> 3 blocks, with 20 of 200 kept back.
  AdmissionDecision d = policy(q);
  EXPECT_EQ(d.admitted, (std::vector<uint64_t>{1, 2, 3}));
  EXPECT_EQ(d.footprints, (std::vector<int32_t>{3, 3, 3}));
  // The reserve: with 25 free only 5 are usable.
  EXPECT_EQ(policy(query(25, 200, cands)).admitted.size(), 1u);
}

TEST(Admission, ProfiledPercentileIsConfigurable) {
  AdmissionConfig config;
  config.min_observations = 1;
  config.percentile = 0.99;
  ProfiledAdmission policy(config);
  for (int i = 0; i < 90; ++i) policy.record_finished(20);
  for (int i = 0; i < 10; ++i) policy.record_finished(700);
  EXPECT_GE(policy.predicted_output(1000), 700);
  EXPECT_LE(policy.predicted_output(1000), 700 * 9 / 8);
}

TEST(LengthHistogram, BucketsAreExactThenLogLinear) {
  for (int64_t v : {0, 1, 15}) EXPECT_EQ(LengthHistogram::upper_bound(LengthHistogram::bucket_of(v)), v);
  for (int64_t v = 16; v < 100000; v = v * 5 / 4 + 1) {
    int32_t ub = LengthHistogram::upper_bound(LengthHistogram::bucket_of(v));
    EXPECT_GE(ub, v);
    EXPECT_LE(double(ub), double(v) * 1.125 + 1) << v;
    EXPECT_EQ(LengthHistogram::bucket_of(ub), LengthHistogram::bucket_of(v));
  }
  EXPECT_EQ(LengthHistogram::bucket_of(int64_t(1) << 40), LengthHistogram::kBuckets - 1);
  EXPECT_EQ(LengthHistogram::bucket_of(-5), 0);
}

TEST(LengthHistogram, QuantilesAndWindow) {
  LengthHistogram h(100);
  EXPECT_EQ(h.quantile(0.5), 0);
  for (int i = 0; i < 99; ++i) h.record(1000);
  EXPECT_GE(h.quantile(0.5), 1000);
  EXPECT_LE(h.quantile(0.5), 1125);
  h.record(1000);  // the 100th: counts are halved
  EXPECT_EQ(h.count(), 50u);
  EXPECT_EQ(h.recorded(), 100u);
  // New traffic outweighs the halved history.
  for (int i = 0; i < 99; ++i) h.record(3);
  EXPECT_EQ(h.quantile(0.5), 3);
  EXPECT_EQ(h.quantile(0.0), 3);
  EXPECT_GE(h.quantile(1.0), 1000);
}

}  // namespace
}  // namespace conveyor
