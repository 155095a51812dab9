#include "model/sampling/sampler.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

namespace conveyor {
namespace {

SamplingParams seeded(uint64_t seed) {
  SamplingParams p;
  p.seed = seed;
  p.has_seed = true;
  return p;
}

std::vector<float> random_logits(size_t vocab, uint64_t seed, float scale = 3.0f) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> logits(vocab);
  for (float& l : logits) l = normal(gen);
  return logits;
}

// Logits whose softmax is exactly `probs`.
std::vector<float> logits_of(const std::vector<double>& probs) {
  std::vector<float> logits;
  for (double p : probs) logits.push_back(static_cast<float>(std::log(p)));
  return logits;
}

// Samples `draws` times from fresh copies of `logits`; returns frequencies.
std::vector<double> frequencies(Sampler& sampler, const std::vector<float>& logits, int draws) {
  std::vector<double> freq(logits.size(), 0.0);
  std::vector<float> row;
  for (int i = 0; i < draws; ++i) {
    row = logits;
    const int32_t token = sampler.sample(row).token;
    EXPECT_GE(token, 0);
    EXPECT_LT(token, static_cast<int32_t>(logits.size()));
    freq[token] += 1.0;
  }
  for (double& f : freq) f /= draws;
  return freq;
}

std::vector<double> softmax(const std::vector<float>& logits, double temperature) {
  const double max = *std::max_element(logits.begin(), logits.end());
  std::vector<double> p;
  for (float l : logits) p.push_back(std::exp((l - max) / temperature));
  const double total = std::accumulate(p.begin(), p.end(), 0.0);
  for (double& x : p) x /= total;
  return p;
}

std::vector<int32_t> draw_sequence(Sampler& sampler, const std::vector<float>& logits, int n) {
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) {
    std::vector<float> row = logits;
    out.push_back(sampler.sample(row).token);
  }
  return out;
}

TEST(Sampler, GreedyPicksArgmaxLowestIdOnTies) {
  SamplingParams p = seeded(1);
  p.temperature = 0.0f;
  Sampler sampler(p, {});
  std::vector<float> logits = {1.0f, 3.0f, 2.0f, 3.0f};
  EXPECT_EQ(sampler.sample(logits).token, 1);

  p.temperature = 1e-6f;  // below the greedy threshold
  Sampler tiny(p, {});
  for (int i = 0; i < 20; ++i) {
    std::vector<float> row = random_logits(1000, i);
    const auto expected = std::max_element(row.begin(), row.end()) - row.begin();
    EXPECT_EQ(tiny.sample(row).token, expected);
  }
}

// logit_bias adds to the raw logits before the penalties and the draw: it
// moves greedy picks and the sampled distribution, not the reported logprobs
// (those are the model's), and keeps a sequence off the device sampler.
TEST(Sampler, LogitBiasMovesTheLogitsBeforeEverythingElse) {
  SamplingParams p = seeded(1);
  p.temperature = 0.0f;
  p.logprobs = 0;
  p.logit_bias = {{0, 100.0f}, {1, -100.0f}};
  Sampler greedy(p, {});
  EXPECT_FALSE(greedy.device_samplable());
  std::vector<float> logits = {1.0f, 3.0f, 2.0f};
  const SampleResult r = greedy.sample(logits);
  EXPECT_EQ(r.token, 0);
  EXPECT_NEAR(r.logprob, 1.0f - std::log(std::exp(1.0f) + std::exp(3.0f) + std::exp(2.0f)), 1e-5f);

  // Banned by -100, a token is never drawn, even when it is the likeliest.
  p = seeded(2);
  p.logit_bias = {{3, -100.0f}};
  Sampler sampler(p, {});
  std::vector<float> row = {0.0f, 0.5f, 0.2f, 6.0f};
  for (int i = 0; i < 500; ++i) {
    std::vector<float> copy = row;
    EXPECT_NE(sampler.sample(copy).token, 3);
  }
  SamplingParams plain = seeded(2);
  EXPECT_TRUE(Sampler(plain, {}).device_samplable());
}

TEST(Sampler, SameSeedSameSequenceDifferentSeedsDiffer) {
  const auto logits = random_logits(1000, 7, 0.5f);
  Sampler a(seeded(42), {}), b(seeded(42), {}), c(seeded(43), {});
  const auto sa = draw_sequence(a, logits, 64);
  EXPECT_EQ(sa, draw_sequence(b, logits, 64));
  EXPECT_NE(sa, draw_sequence(c, logits, 64));
}

TEST(Sampler, UnseededSamplersDiffer) {
  const std::vector<float> flat(1000, 0.0f);
  Sampler a(SamplingParams{}, {}), b(SamplingParams{}, {});
  EXPECT_NE(draw_sequence(a, flat, 64), draw_sequence(b, flat, 64));
}

TEST(Sampler, StreamDoesNotDependOnOtherSamplers) {
  SamplingParams pa = seeded(5), pb = seeded(6);
  pb.top_k = 50;
  pb.top_p = 0.9f;
  const auto la = random_logits(500, 1, 1.0f);
  const auto lb = random_logits(500, 2, 1.0f);

  Sampler alone_a(pa, {}), alone_b(pb, {});
  const auto expect_a = draw_sequence(alone_a, la, 40);
  const auto expect_b = draw_sequence(alone_b, lb, 40);

  Sampler a(pa, {}), b(pb, {});
  std::vector<int32_t> got_a, got_b;
  for (int i = 0; i < 40; ++i) {
    std::vector<float> ra = la, rb = lb;
    got_b.push_back(b.sample(rb).token);  // b first: order must not matter
    got_a.push_back(a.sample(ra).token);
  }
  EXPECT_EQ(got_a, expect_a);
  EXPECT_EQ(got_b, expect_b);
}

TEST(Sampler, TemperatureMatchesSoftmaxOfScaledLogits) {
  const std::vector<float> logits = {0.0f, 1.0f, 2.0f, -1.0f, 0.5f, 1.5f, -0.5f, 0.25f};
  for (float temperature : {0.5f, 1.0f, 2.0f}) {
    SamplingParams p = seeded(11);
    p.temperature = temperature;
    Sampler sampler(p, {});
    const int draws = 100000;
    const auto freq = frequencies(sampler, logits, draws);
    const auto expected = softmax(logits, temperature);
    double chi2 = 0.0;
    for (size_t i = 0; i < logits.size(); ++i) {
      EXPECT_NEAR(freq[i], expected[i], 0.01) << "T=" << temperature << " token " << i;
      const double diff = (freq[i] - expected[i]) * draws;
      chi2 += diff * diff / (expected[i] * draws);
    }
    // 7 degrees of freedom: the 99.9% quantile is 24.3.
    EXPECT_LT(chi2, 24.3) << "T=" << temperature;
  }
}

TEST(Sampler, TopKOneIsGreedy) {
  SamplingParams p = seeded(3);
  p.top_k = 1;
  p.temperature = 1.5f;
  Sampler sampler(p, {});
  for (int i = 0; i < 50; ++i) {
    std::vector<float> row = random_logits(32000, 100 + i, 0.1f);
    const auto expected = std::max_element(row.begin(), row.end()) - row.begin();
    EXPECT_EQ(sampler.sample(row).token, expected);
  }
}

TEST(Sampler, TopKKeepsTheKMostLikelyRenormalised) {
  const auto logits = logits_of({0.1, 0.4, 0.05, 0.3, 0.15});
  SamplingParams p = seeded(4);
  p.top_k = 2;
  Sampler sampler(p, {});
  const auto freq = frequencies(sampler, logits, 20000);
  EXPECT_EQ(freq[0] + freq[2] + freq[4], 0.0);
  EXPECT_NEAR(freq[1], 0.4 / 0.7, 0.015);
  EXPECT_NEAR(freq[3], 0.3 / 0.7, 0.015);
}

TEST(Sampler, TopPKeepsTheSmallestNucleus) {
  const auto logits = logits_of({0.15, 0.5, 0.1, 0.25});
  for (float top_p : {0.6f, 0.75f}) {  // 0.75 is exactly 0.5 + 0.25
    SamplingParams p = seeded(8);
    p.top_p = top_p;
    Sampler sampler(p, {});
    const auto freq = frequencies(sampler, logits, 20000);
    EXPECT_EQ(freq[0] + freq[2], 0.0) << "top_p=" << top_p;
    EXPECT_NEAR(freq[1], 2.0 / 3.0, 0.015);
    EXPECT_NEAR(freq[3], 1.0 / 3.0, 0.015);
  }
  SamplingParams p = seeded(8);
  p.top_p = 0.76f;  // just over: the third token joins
  Sampler sampler(p, {});
  const auto freq = frequencies(sampler, logits, 20000);
  EXPECT_GT(freq[0], 0.1);
  EXPECT_EQ(freq[2], 0.0);
}

// A nucleus much wider than the first sorted block (64) of a 32000 vocab.
TEST(Sampler, TopPOnWideNucleus) {
  std::vector<float> logits(32000, 0.0f);
  for (int i = 0; i < 1000; ++i) logits[31000 - 7 * i] = 5.0f;  // 1000 heavy tokens
  const double heavy = std::exp(5.0), mass = 1000 * heavy + 31000;
  SamplingParams p = seeded(9);
  p.top_p = static_cast<float>(500 * heavy / mass);  // half of the heavy tokens
  Sampler sampler(p, {});
  std::vector<int> count(32000, 0);
  const int draws = 8000;  // 16 per nucleus token on average
  for (int i = 0; i < draws; ++i) {
    std::vector<float> row = logits;
    ++count[sampler.sample(row).token];
  }
  // Ties go to the lower ids: the nucleus is the 500 heavy tokens with the lowest ids.
  for (int i = 0; i < 1000; ++i) {
    const int id = 31000 - 7 * i;
    if (i >= 500) {
      EXPECT_GT(count[id], 0) << id;
    } else {
      EXPECT_EQ(count[id], 0) << id;
    }
  }
  EXPECT_EQ(std::accumulate(count.begin(), count.end(), 0), draws);
  EXPECT_EQ(count[0] + count[1] + count[31999], 0);
}

TEST(Sampler, MinPDropsTokensBelowFractionOfTheMax) {
  const auto logits = logits_of({0.5, 0.1, 0.25, 0.15});
  SamplingParams p = seeded(10);
  p.min_p = 0.25f;  // threshold 0.125: token 1 (0.1) goes
  Sampler sampler(p, {});
  const auto freq = frequencies(sampler, logits, 20000);
  EXPECT_EQ(freq[1], 0.0);
  EXPECT_NEAR(freq[0], 0.5 / 0.9, 0.015);
  EXPECT_NEAR(freq[2], 0.25 / 0.9, 0.015);
  EXPECT_NEAR(freq[3], 0.15 / 0.9, 0.015);

  p.min_p = 1.0f;  // only the max survives
  Sampler only_max(p, {});
  EXPECT_EQ(frequencies(only_max, logits, 1000)[0], 1.0);
}

TEST(Sampler, FiltersCombineInOrder) {
  // top-k 3 keeps {0.4, 0.3, 0.2} -> renormalised {4/9, 3/9, 2/9}; top-p 0.7
  // keeps {4/9, 3/9}; min-p 0.8 then drops 3/9 (< 0.8 * 4/9).
  const auto logits = logits_of({0.05, 0.3, 0.4, 0.05, 0.2});
  SamplingParams p = seeded(12);
  p.top_k = 3;
  p.top_p = 0.7f;
  Sampler kp(p, {});
  const auto freq = frequencies(kp, logits, 20000);
  EXPECT_NEAR(freq[2], 4.0 / 7.0, 0.015);
  EXPECT_NEAR(freq[1], 3.0 / 7.0, 0.015);
  EXPECT_EQ(freq[4], 0.0);
  p.min_p = 0.8f;
  Sampler kpm(p, {});
  EXPECT_EQ(frequencies(kpm, logits, 1000)[2], 1.0);
}

// The reference pipeline in double precision over the full sorted row.
std::vector<double> reference_distribution(const std::vector<float>& logits,
                                           const SamplingParams& p) {
  std::vector<int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  if (p.top_k > 0 && static_cast<size_t>(p.top_k) < order.size()) order.resize(p.top_k);
  const auto probs = softmax(logits, p.temperature);
  double kept_mass = 0.0;
  for (int32_t t : order) kept_mass += probs[t];
  double cumulative = 0.0;
  size_t keep = 0;
  while (keep < order.size() && cumulative < p.top_p * kept_mass) cumulative += probs[order[keep++]];
  order.resize(keep);
  std::vector<double> out(logits.size(), 0.0);
  double total = 0.0;
  for (int32_t t : order) {
    if (probs[t] >= p.min_p * probs[order[0]]) {
      out[t] = probs[t];
      total += probs[t];
    }
  }
  for (double& x : out) x /= total;
  return out;
}

TEST(Sampler, FullVocabPipelineMatchesReference) {
  const auto logits = random_logits(32000, 77, 3.0f);
  struct Case { int32_t top_k; float top_p, min_p, temperature; };
  for (const Case c : {Case{0, 0.8f, 0.0f, 0.7f}, Case{0, 0.95f, 0.02f, 1.3f},
                       Case{50, 0.9f, 0.0f, 1.0f}, Case{20, 1.0f, 0.1f, 0.5f},
                       Case{0, 1.0f, 0.05f, 1.0f}}) {
    SamplingParams p = seeded(31);
    p.top_k = c.top_k;
    p.top_p = c.top_p;
    p.min_p = c.min_p;
    p.temperature = c.temperature;
    const auto expected = reference_distribution(logits, p);
    Sampler sampler(p, {});
    const auto freq = frequencies(sampler, logits, 3000);
    for (size_t t = 0; t < logits.size(); ++t) {
      if (expected[t] == 0.0) {
        ASSERT_EQ(freq[t], 0.0) << "token " << t << " is outside the filters";
      } else {
        EXPECT_NEAR(freq[t], expected[t], 0.04) << "token " << t;
      }
    }
  }
}

TEST(Sampler, RepetitionPenaltyOverPromptAndGenerated) {
  SamplingParams p = seeded(1);
  p.temperature = 0.0f;
  p.repetition_penalty = 2.0f;
  const std::vector<int32_t> prompt = {1, 2, 2, 99999};  // out-of-range ids are ignored
  Sampler sampler(p, prompt);
  std::vector<float> logits = {1.0f, 3.0f, -1.5f, 0.5f, 4.0f};
  sampler.apply_penalties(logits);
  EXPECT_EQ(logits, (std::vector<float>{1.0f, 1.5f, -3.0f, 0.5f, 4.0f}));

  std::vector<float> row = {0.0f, 1.0f, -1.0f, 0.0f, 4.0f};
  ASSERT_EQ(sampler.sample(row).token, 4);
  EXPECT_EQ(row, (std::vector<float>{0.0f, 0.5f, -2.0f, 0.0f, 4.0f}));  // left as penalised
  logits = {1.0f, 3.0f, -1.5f, 0.5f, 4.0f};
  sampler.apply_penalties(logits);
  EXPECT_EQ(logits, (std::vector<float>{1.0f, 1.5f, -3.0f, 0.5f, 2.0f}));  // once, not per count
}

TEST(Sampler, FrequencyAndPresencePenaltiesOverGeneratedOnly) {
  SamplingParams p = seeded(1);
  p.temperature = 0.0f;
  p.frequency_penalty = 0.5f;
  p.presence_penalty = 0.25f;
  Sampler sampler(p, std::vector<int32_t>{2, 3});  // the prompt does not count
  for (int32_t token : {4, 0, 4}) {
    std::vector<float> row(5, 0.0f);
    row[token] = 100.0f;
    ASSERT_EQ(sampler.sample(row).token, token);
  }
  EXPECT_EQ(sampler.generated_count(4), 2);
  EXPECT_EQ(sampler.generated_count(0), 1);
  std::vector<float> logits = {1.0f, 2.0f, 3.0f, 4.0f, 5.0f};
  sampler.apply_penalties(logits);
  EXPECT_FLOAT_EQ(logits[0], 1.0f - 0.5f * 1 - 0.25f);
  EXPECT_FLOAT_EQ(logits[1], 2.0f);
  EXPECT_FLOAT_EQ(logits[2], 3.0f);
  EXPECT_FLOAT_EQ(logits[3], 4.0f);
  EXPECT_FLOAT_EQ(logits[4], 5.0f - 0.5f * 2 - 0.25f);
}

TEST(Sampler, PenaltiesApplyBeforeTheChoice) {
  SamplingParams p = seeded(1);
  p.temperature = 0.0f;
  p.presence_penalty = 0.5f;
  Sampler sampler(p, {});
  std::vector<float> row = {2.0f, 1.9f};
  EXPECT_EQ(sampler.sample(row).token, 0);
  row = {2.0f, 1.9f};
  EXPECT_EQ(sampler.sample(row).token, 1);  // 2.0 - 0.5 < 1.9
}

TEST(Sampler, LogprobsAreRawLogSoftmaxAndTopIsSorted) {
  const auto logits = random_logits(1000, 21, 2.0f);
  double max = *std::max_element(logits.begin(), logits.end()), total = 0.0;
  for (float l : logits) total += std::exp(l - max);
  const double lse = max + std::log(total);

  SamplingParams p = seeded(2);
  p.temperature = 0.7f;  // neither temperature nor penalties change the logprobs
  p.repetition_penalty = 1.3f;
  p.frequency_penalty = 1.0f;
  p.top_k = 10;
  p.logprobs = 5;
  std::vector<int32_t> prompt(50);
  std::iota(prompt.begin(), prompt.end(), 0);
  Sampler sampler(p, prompt);
  for (int step = 0; step < 5; ++step) {
    std::vector<float> row = logits;
    const SampleResult r = sampler.sample(row);
    EXPECT_NEAR(r.logprob, logits[r.token] - lse, 1e-4);
    ASSERT_EQ(r.top.size(), 5u);
    std::vector<int32_t> order(logits.size());
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + 5, order.end(),
                      [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
    for (size_t i = 0; i < 5; ++i) {
      EXPECT_EQ(r.top[i].token, order[i]);
      EXPECT_NEAR(r.top[i].logprob, logits[order[i]] - lse, 1e-4);
      if (i > 0) {
        EXPECT_GE(r.top[i - 1].logprob, r.top[i].logprob);
      }
    }
  }
}

TEST(Sampler, LogprobsCountIsClamped) {
  const auto logits = random_logits(100, 3);
  SamplingParams p = seeded(2);
  p.logprobs = 50;  // validate() rejects this; the sampler still clamps to 20
  Sampler many(p, {});
  std::vector<float> row = logits;
  EXPECT_EQ(many.sample(row).top.size(), 20u);

  p.logprobs = 5;
  Sampler small_vocab(p, {});
  row = {0.0f, 1.0f, 2.0f};
  const auto r = small_vocab.sample(row);
  ASSERT_EQ(r.top.size(), 3u);
  EXPECT_EQ(r.top[0].token, 2);
  EXPECT_EQ(r.top[2].token, 0);

  p.logprobs = 0;  // the sampled token's logprob only
  Sampler zero(p, {});
  row = {0.0f, 0.0f};
  const auto z = zero.sample(row);
  EXPECT_TRUE(z.top.empty());
  EXPECT_NEAR(z.logprob, std::log(0.5), 1e-6);
}

TEST(Sampler, MaskedLogitsAreNeverDrawn) {
  const float neg_inf = -std::numeric_limits<float>::infinity();
  std::vector<float> logits(100, neg_inf);
  logits[17] = 0.0f;
  logits[60] = 0.0f;
  SamplingParams p = seeded(13);
  Sampler full(p, {});
  auto freq = frequencies(full, logits, 2000);
  EXPECT_NEAR(freq[17] + freq[60], 1.0, 1e-12);
  EXPECT_GT(freq[17], 0.4);
  p.top_p = 0.9f;
  Sampler filtered(p, {});
  freq = frequencies(filtered, logits, 2000);
  EXPECT_NEAR(freq[17] + freq[60], 1.0, 1e-12);
}

TEST(Sampler, IsStopToken) {
  SamplingParams p;
  p.stop_token_ids = {7};
  const std::vector<int32_t> eos = {2, 3};
  Sampler sampler(p, {});
  EXPECT_TRUE(sampler.is_stop_token(2, eos));
  EXPECT_TRUE(sampler.is_stop_token(3, eos));
  EXPECT_TRUE(sampler.is_stop_token(7, eos));
  EXPECT_FALSE(sampler.is_stop_token(4, eos));
  p.ignore_eos = true;
  Sampler ignoring(p, {});
  EXPECT_FALSE(ignoring.is_stop_token(2, eos));
  EXPECT_TRUE(ignoring.is_stop_token(7, eos));
}

}  // namespace
}  // namespace conveyor
