#include "model/sampling/filters.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

namespace conveyor::sampling {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

std::vector<float> random_row(size_t n, uint64_t seed, float scale, bool ties = false) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> row(n);
  for (float& l : row) l = ties ? std::round(normal(gen)) : normal(gen);
  return row;
}

// Every token with a logit above -inf, most likely first.
std::vector<Candidate> ranked(const std::vector<float>& logits) {
  std::vector<Candidate> all;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (logits[i] > -kInf) all.emplace_back(logits[i], static_cast<int32_t>(i));
  }
  std::sort(all.begin(), all.end(), more_likely);
  return all;
}

std::vector<int32_t> ids(std::vector<Candidate> cands) {
  std::vector<int32_t> out;
  for (const auto& c : cands) out.push_back(c.second);
  std::sort(out.begin(), out.end());
  return out;
}

// The reference nucleus: walk the full ranking until the mass is reached.
std::vector<int32_t> brute_nucleus(const std::vector<float>& logits,
                                   const std::vector<float>& weights, double mass) {
  std::vector<Candidate> kept;
  double cumulative = 0.0;
  for (const auto& c : ranked(logits)) {
    if (weights[c.second] <= 0.0f) continue;
    kept.push_back(c);
    cumulative += weights[c.second];
    if (cumulative >= mass) break;
  }
  return ids(kept);
}

TEST(Filters, ExpMatchesStdExp) {
  EXPECT_EQ(exp_nonpositive(0.0f), 1.0f);
  EXPECT_EQ(exp_nonpositive(-kInf), 0.0f);
  EXPECT_EQ(exp_nonpositive(kNaN), 0.0f);
  EXPECT_EQ(exp_nonpositive(-100.0f), 0.0f);
  double worst = 0.0;
  for (float x = -87.0f; x <= 0.0f; x += 0.00731f) {
    const double expected = std::exp(static_cast<double>(x));
    worst = std::max(worst, std::abs(exp_nonpositive(x) - expected) / expected);
  }
  EXPECT_LT(worst, 5e-7);
}

TEST(Filters, ArgmaxAndMax) {
  EXPECT_EQ(argmax(std::vector<float>{1.0f, 3.0f, 2.0f, 3.0f}), 1);
  EXPECT_EQ(argmax(std::vector<float>{kNaN, -1.0f, kNaN, 0.5f}), 3);
  EXPECT_EQ(argmax(std::vector<float>{-kInf, -kInf}), 0);
  EXPECT_EQ(argmax(std::vector<float>{kNaN, kNaN}), 0);
  EXPECT_EQ(max_logit(std::vector<float>{kNaN, -kInf}), -kInf);
  const auto row = random_row(32001, 1, 3.0f);
  const auto best = std::max_element(row.begin(), row.end());
  EXPECT_EQ(argmax(row), best - row.begin());
  EXPECT_EQ(max_logit(row), *best);
}

TEST(Filters, SoftmaxWeightsAndLogSumExp) {
  auto row = random_row(1001, 2, 4.0f);
  row[5] = -kInf;
  row[6] = kNaN;
  std::vector<float> weights(row.size());
  const float max = max_logit(row);
  const double total = softmax_weights(row, max, 0.5f, weights);
  double expected_total = 0.0, reference_lse = 0.0;
  for (size_t i = 0; i < row.size(); ++i) {
    const double expected = (i == 5 || i == 6) ? 0.0 : std::exp((row[i] - max) * 0.5);
    EXPECT_NEAR(weights[i], expected, 1e-6 * expected + 1e-30) << i;
    expected_total += expected;
    if (i != 5 && i != 6) reference_lse += std::exp(static_cast<double>(row[i]) - max);
  }
  EXPECT_NEAR(total, expected_total, 1e-6 * expected_total);
  EXPECT_EQ(weights[std::max_element(row.begin(), row.end()) - row.begin()], 1.0f);

  row[6] = 0.0f;
  reference_lse = max + std::log(reference_lse + std::exp(0.0 - max));
  EXPECT_NEAR(log_sum_exp(row), reference_lse, 1e-5);
  EXPECT_EQ(log_sum_exp(std::vector<float>{-kInf, -kInf}), -kInf);
}

TEST(Filters, TopKMatchesFullSort) {
  for (bool ties : {false, true}) {
    auto row = random_row(5000, 3, 2.0f, ties);
    row[10] = -kInf;
    const auto reference = ranked(row);
    for (int32_t k : {1, 7, 40, 600, 4000, 4999, 6000}) {  // heap and selection paths
      std::vector<Candidate> got;
      top_k(row, k, got);
      const size_t n = std::min<size_t>(k, reference.size());
      ASSERT_EQ(got.size(), n) << k;
      EXPECT_TRUE(std::equal(got.begin(), got.end(), reference.begin())) << "k=" << k;
    }
  }
}

TEST(Filters, CutToMassMatchesBruteForce) {
  std::mt19937_64 gen(4);
  std::uniform_real_distribution<double> share(0.0, 1.0);
  for (uint64_t seed = 0; seed < 20; ++seed) {
    const auto row = random_row(3000, 100 + seed, 1.5f, seed % 2 == 0);
    std::vector<float> weights(row.size());
    const double total = softmax_weights(row, max_logit(row), 1.0f, weights);
    for (int trial = 0; trial < 5; ++trial) {
      const double mass = share(gen) * total;
      auto cands = ranked(row);
      std::shuffle(cands.begin(), cands.end(), gen);
      const size_t kept = cut_to_mass(cands, weights, mass);
      EXPECT_EQ(kept, cands.size());
      EXPECT_EQ(ids(cands), brute_nucleus(row, weights, mass)) << seed;
    }
  }
}

TEST(Filters, NucleusMatchesBruteForce) {
  std::mt19937_64 gen(5);
  std::uniform_real_distribution<double> share(0.0, 1.0);
  for (uint64_t seed = 0; seed < 12; ++seed) {
    auto row = random_row(32000, 200 + seed, seed < 6 ? 2.5f : 0.3f, seed % 3 == 0);
    row[seed] = -kInf;
    row[seed + 100] = -200.0f;  // weight 0: never a candidate
    for (float temperature : {0.3f, 1.0f, 3.0f}) {
      std::vector<float> weights(row.size());
      const float max = max_logit(row);
      const double total = softmax_weights(row, max, 1.0f / temperature, weights);
      for (double p : {share(gen), share(gen), 0.999999}) {
        std::vector<Candidate> got;
        nucleus(row, weights, max, 1.0f / temperature, p * total, got);
        EXPECT_EQ(ids(got), brute_nucleus(row, weights, p * total))
            << "seed " << seed << " T " << temperature << " p " << p;
      }
    }
  }
  // Unreachable mass: every token of positive weight, however far down.
  {
    const std::vector<float> row = {0.0f, -70.0f, -200.0f, -kInf, -1.0f};
    std::vector<float> w(row.size());
    const double total = softmax_weights(row, 0.0f, 1.0f, w);
    std::vector<Candidate> got;
    nucleus(row, w, 0.0f, 1.0f, 2.0 * total, got);
    EXPECT_EQ(ids(got), (std::vector<int32_t>{0, 1, 4}));
  }
  // A flat row: one bucket holds everything, ties resolve by id.
  std::vector<float> flat(1000, 0.5f), weights(1000);
  const double total = softmax_weights(flat, 0.5f, 1.0f, weights);
  std::vector<Candidate> got;
  nucleus(flat, weights, 0.5f, 1.0f, 0.3005 * total, got);
  std::vector<int32_t> first_301(301);
  for (int32_t i = 0; i < 301; ++i) first_301[i] = i;
  EXPECT_EQ(ids(got), first_301);
}

TEST(Filters, DrawFollowsWeights) {
  const std::vector<float> weights = {0.0f, 1.0f, 0.0f, 3.0f, 0.5f};
  const std::vector<Candidate> cands = {{0, 3}, {0, 0}, {0, 1}, {0, 4}};
  const int n = 4500;
  std::vector<int> from_list(5, 0), from_row(5, 0), from_row_min(5, 0);
  for (int i = 0; i < n; ++i) {
    const double u = (i + 0.5) / n;
    ++from_list[draw(cands, weights, u)];
    ++from_row[draw_row(weights, 0.0f, u)];
    ++from_row_min[draw_row(weights, 0.6f, u)];
  }
  EXPECT_EQ(from_list, (std::vector<int>{0, 1000, 0, 3000, 500}));
  EXPECT_EQ(from_row, (std::vector<int>{0, 1000, 0, 3000, 500}));
  EXPECT_EQ(from_row_min, (std::vector<int>{0, 1125, 0, 3375, 0}));
  EXPECT_EQ(draw(cands, weights, 0.0), 3);
  EXPECT_EQ(draw_row(weights, 0.0f, 0.0), 1);
  EXPECT_EQ(draw_row(weights, 0.0f, 1.0 - 0x1.0p-53), 4);
}

TEST(Filters, DrawRowAcrossBlocks) {
  std::vector<float> weights(1000, 0.0f);
  weights[3] = 1.0f;
  weights[500] = 1.0f;
  weights[999] = 2.0f;
  EXPECT_EQ(draw_row(weights, 0.0f, 0.2), 3);
  EXPECT_EQ(draw_row(weights, 0.0f, 0.3), 500);
  EXPECT_EQ(draw_row(weights, 0.0f, 0.6), 999);
}

}  // namespace
}  // namespace conveyor::sampling
