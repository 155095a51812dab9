// The CUDA kernels' per-element math (kernels/cuda/*_math.hpp), compiled for
// the host and checked against the CPU kernels: the same functions the
// device kernels call, in the same loops (fixtures.hpp emulates the loops
// whose order matters). Runs everywhere; no GPU needed.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "kernels/cpu/kv_dtype.hpp"
#include "kernels/cpu/rmsnorm.hpp"
#include "kernels/cpu/rope.hpp"
#include "kernels/cpu/simd.hpp"
#include "kernels/cpu/swiglu.hpp"
#include "kernels/cuda/elementwise_math.hpp"
#include "kernels/cuda/sampling_math.hpp"
#include "model/rope_scaling.hpp"
#include "model/sampling/filters.hpp"
#include "model/sampling/sampler.hpp"
#include "tests/kernels/cuda/fixtures.hpp"
#include "tests/kernels/cuda/host_sampling.hpp"

namespace conveyor::kernels::cuda {
namespace {

using testing::make_batch;
using testing::random_vector;
using testing::relative_error;

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

std::vector<float> interesting_floats(uint32_t seed, size_t n) {
  std::vector<float> v = {0.0f, -0.0f, 1.0f, -1.0f, 65504.0f, 65520.0f, 1e-8f, -3e-5f, 6.1e-5f, 1e-40f,
                          std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::quiet_NaN(), 3.4e38f};
  std::mt19937 rng(seed);
  for (size_t i = 0; i < n; ++i) v.push_back(std::bit_cast<float>(uint32_t(rng())));  // every exponent
  for (float x : random_vector(n, seed + 1, -70000.0f, 70000.0f)) v.push_back(x);
  return v;
}

TEST(CudaMath, HalfConversionsAreTheCpusBitForBit) {
  for (float x : interesting_floats(1, 200000)) {
    ASSERT_EQ(f32_to_f16(x), kv_half::f32_to_f16(x)) << x;
    ASSERT_EQ(f32_to_bf16(x), kv_half::f32_to_bf16(x)) << x;
  }
  for (uint32_t h = 0; h < 65536; ++h) {
    const float a = f16_to_f32(uint16_t(h)), b = kv_half::f16_to_f32(uint16_t(h));
    ASSERT_EQ(bits(a), bits(b)) << h;
    ASSERT_EQ(bits(bf16_to_f32(uint16_t(h))), bits(kv_half::bf16_to_f32(uint16_t(h)))) << h;
  }
}

TEST(CudaMath, ExpFastIsTheCpusBitForBit) {
  for (float x : random_vector(100000, 3, -100.0f, 100.0f)) ASSERT_EQ(bits(exp_fast(x)), bits(simd::exp_fast(x))) << x;
}

TEST(CudaMath, RmsNormMatchesTheCpuKernel) {
  for (int32_t dim : {1, 7, 64, 288, 1000}) {
    const int32_t n = 5;
    const auto x = random_vector(size_t(n) * dim, 10 + dim, -3.0f, 3.0f);
    const auto w = random_vector(size_t(dim), 11 + dim);
    std::vector<float> cpu(x.size()), gpu(x.size());
    kernels::rmsnorm(x.data(), dim, n, dim, w.data(), 1e-5f, cpu.data(), dim);
    for (int32_t t = 0; t < n; ++t) {
      float sum = 0.0f;
      for (int32_t i = 0; i < dim; ++i) sum += x[size_t(t) * dim + i] * x[size_t(t) * dim + i];
      const float scale = rmsnorm_scale(sum, dim, 1e-5f);
      for (int32_t i = 0; i < dim; ++i)
        gpu[size_t(t) * dim + i] = rmsnorm_apply(x[size_t(t) * dim + i], scale, w[size_t(i)]);
    }
    EXPECT_LT(relative_error(gpu.data(), cpu.data(), x.size()), 1e-6) << dim;
  }
}

TEST(CudaMath, SwiGluMatchesTheCpuKernel) {
  const auto gate = random_vector(4000, 20, -20.0f, 20.0f), up = random_vector(4000, 21, -2.0f, 2.0f);
  std::vector<float> cpu(4000);
  kernels::swiglu(gate.data(), up.data(), 1000, 4, 1000, cpu.data(), 1000);
  for (size_t i = 0; i < cpu.size(); ++i)
    ASSERT_NEAR(swiglu(gate[i], up[i]), cpu[i], 1e-6f * std::max(1.0f, std::abs(cpu[i]))) << i;
}

// Both layouts, on the per-pair frequencies of a Llama 3.1-style file
// (frequency factors) stretched by YaRN, and on a partial rotary dimension.
TEST(CudaMath, RopeMatchesTheCpuKernelInBothLayouts) {
  ModelConfig c;
  c.dim = 256;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.rope_theta = 500000.0f;
  c.rope_scaling = RopeScaling::yarn;
  c.rope_scaling_factor = 4.0f;
  c.rope_original_context = 2048;
  const int32_t hd = c.head_dim(), rot = c.rotary_dim(), half = rot / 2;
  std::vector<float> factors(static_cast<size_t>(half));
  for (int32_t i = 0; i < half; ++i) factors[size_t(i)] = 1.0f + float(i) / float(half) * 7.0f;
  const RopeFrequencies f = rope_frequencies(c, factors);
  const int32_t n_pos = 3000, n = 6, heads = c.n_heads + c.n_kv_heads;
  std::vector<float> table(size_t(rope_table_floats(rot, n_pos)));
  kernels::rope_table(f.pair_freqs, f.scale, n_pos, table.data());
  const std::vector<int32_t> positions = {0, 1, 17, 1023, 2048, 2999};
  for (RopeStyle style : {RopeStyle::adjacent_pairs, RopeStyle::half_split}) {
    const bool adjacent = style == RopeStyle::adjacent_pairs;
    auto cpu = random_vector(size_t(n) * heads * hd, 30);
    auto gpu = cpu;
    kernels::rope_apply(cpu.data(), heads * hd, n, heads, hd, rot, style, positions.data(), table.data());
    for (int32_t t = 0; t < n; ++t)
      for (int32_t h = 0; h < heads; ++h) {
        float* head = gpu.data() + (size_t(t) * heads + h) * hd;
        const float* cs = table.data() + int64_t(positions[size_t(t)]) * half * 2;
        for (int32_t i = 0; i < half; ++i) {
          float* a = head + rope_first(i, adjacent);
          rope_rotate(a[0], a[rope_partner(half, adjacent)], cs[2 * i], cs[2 * i + 1]);
        }
      }
    EXPECT_LT(relative_error(gpu.data(), cpu.data(), cpu.size()), 1e-6) << int(style);
  }
}

TEST(CudaMath, EmbeddingGatherWidensBf16Rows) {
  const int32_t vocab = 50, dim = 24;
  const auto values = random_vector(size_t(vocab) * dim, 40);
  std::vector<uint16_t> table(values.size());
  for (size_t i = 0; i < values.size(); ++i) table[i] = kv_half::f32_to_bf16(values[i]);
  for (int32_t token : {0, 7, 49})
    for (int32_t i = 0; i < dim; ++i)
      ASSERT_EQ(embedding_value(table.data(), dim, token, i),
                kv_half::bf16_to_f32(table[size_t(token) * dim + i]));
}

TEST(CudaMath, SequenceOfTokenSkipsEmptySpans) {
  const std::vector<int32_t> begin = {0, 0, 3, 3, 3, 4, 9};
  const std::vector<int32_t> want = {1, 1, 1, 4, 5, 5, 5, 5, 5};
  for (int32_t t = 0; t < 9; ++t) EXPECT_EQ(sequence_of_token(begin.data(), 6, t), want[size_t(t)]) << t;
}

struct Shape {
  int32_t n_heads, n_kv_heads, head_dim, block_size;
};

// Decode tokens (one long enough to need three partitions), prefill chunks
// from the start and mid-way, and an empty span.
const std::vector<int32_t> kStarts = {700, 5, 0, 300, 10, 0};
const std::vector<int32_t> kSpans = {1, 1, 40, 20, 0, 1};

TEST(CudaMath, KvWritesAreTheCpusBitForBit) {
  for (KvDtype dtype : {KvDtype::f32, KvDtype::f16, KvDtype::bf16, KvDtype::q8_0})
    for (int32_t bs : {8, 16, 32}) {
      SCOPED_TRACE(std::string(kv_dtype_name(dtype)) + " block " + std::to_string(bs));
      const int32_t head_dim = dtype == KvDtype::q8_0 ? 64 : 48;  // q8_0: a multiple of 32
      const auto b = make_batch(4, 2, head_dim, bs, dtype, kStarts, kSpans, 50 + bs);
      std::vector<std::byte> cpu = b.pool, gpu = b.pool;
      kernels::write_kv(b.k.data(), b.v.data(), b.kv_width(), b.spans(), b.view(cpu.data()));
      testing::emulate_write_kv(b, gpu.data());
      ASSERT_EQ(cpu, gpu);
    }
}

TEST(CudaMath, AttentionMatchesTheCpuKernel) {
  const Shape shapes[] = {{2, 2, 64, 16}, {4, 2, 64, 8}, {8, 2, 64, 32}, {16, 2, 64, 16},
                          {6, 2, 48, 16}, {4, 1, 128, 16}, {2, 1, 256, 8}, {4, 4, 16, 32}};
  for (KvDtype dtype : {KvDtype::f32, KvDtype::f16, KvDtype::bf16, KvDtype::q8_0})
    for (const Shape& s : shapes) {
      if (!kv_dtype_fits(dtype, s.head_dim)) continue;  // q8_0: heads a multiple of 32
      SCOPED_TRACE(std::string(kv_dtype_name(dtype)) + " heads " + std::to_string(s.n_heads) + "/" +
                   std::to_string(s.n_kv_heads) + " dim " + std::to_string(s.head_dim) + " block " +
                   std::to_string(s.block_size));
      auto b = make_batch(s.n_heads, s.n_kv_heads, s.head_dim, s.block_size, dtype, kStarts, kSpans, 60);
      kernels::write_kv(b.k.data(), b.v.data(), b.kv_width(), b.spans(), b.view(b.pool.data()));
      std::vector<float> cpu(size_t(b.n_tokens()) * b.q_width()), gpu(cpu.size());
      AttentionWorkspace ws;
      ws.widen_keys = true;  // as the CUDA kernel
      kernels::paged_attention(b.q.data(), b.q_width(), b.n_heads, b.spans(), b.view(b.pool.data()), cpu.data(),
                               b.q_width(), ws);
      testing::emulate_attention(b, b.pool.data(), gpu.data());
      EXPECT_LT(relative_error(gpu.data(), cpu.data(), cpu.size()), 2e-6);
    }
}

// Past 32 partitions of 256 positions, partitions grow instead (a context of
// 9001 positions: 18 of 512), which bounds the workspace; the result is the
// CPU kernel's still.
TEST(CudaMath, LongContextsTakeLongerPartitions) {
  EXPECT_EQ(attention_partitions(8192), 32);
  EXPECT_EQ(attention_partition_length(8192), 256);
  EXPECT_EQ(attention_partition_length(9001), 512);
  EXPECT_EQ(attention_partitions(9001), 18);
  EXPECT_EQ(attention_partitions(1 << 20), 32);
  for (KvDtype dtype : {KvDtype::f32, KvDtype::bf16}) {
    SCOPED_TRACE(kv_dtype_name(dtype));
    auto b = make_batch(4, 2, 64, 16, dtype, {9000, 0, 8190}, {1, 2, 3}, 61);
    ASSERT_EQ(b.max_context(), 9001);
    kernels::write_kv(b.k.data(), b.v.data(), b.kv_width(), b.spans(), b.view(b.pool.data()));
    std::vector<float> cpu(size_t(b.n_tokens()) * b.q_width()), gpu(cpu.size());
    AttentionWorkspace ws;
    ws.widen_keys = true;  // as the CUDA kernel
    kernels::paged_attention(b.q.data(), b.q_width(), b.n_heads, b.spans(), b.view(b.pool.data()), cpu.data(),
                             b.q_width(), ws);
    testing::emulate_attention(b, b.pool.data(), gpu.data());
    EXPECT_LT(relative_error(gpu.data(), cpu.data(), cpu.size()), 2e-6);
  }
}

// ---- sampling --------------------------------------------------------------------

TEST(CudaMath, ExpNonpositiveIsTheSamplersBitForBit) {
  for (float x : random_vector(200000, 70, -100.0f, 0.0f))
    ASSERT_EQ(bits(exp_nonpositive(x)), bits(sampling::exp_nonpositive(x))) << x;
  for (float x : {0.0f, -87.3f, -87.31f, -std::numeric_limits<float>::infinity(),
                  std::numeric_limits<float>::quiet_NaN()})
    ASSERT_EQ(bits(exp_nonpositive(x)), bits(sampling::exp_nonpositive(x))) << x;
}

// The device's argmax: a reduction with argmax_better in any order.
int32_t reduce_argmax(const std::vector<float>& l, uint32_t seed) {
  std::vector<int32_t> order(l.size());
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937(seed));
  float best = l[size_t(order[0])];
  int32_t best_i = order[0];
  for (int32_t i : order)
    if (argmax_better(l[size_t(i)], i, best, best_i)) {
      best = l[size_t(i)];
      best_i = i;
    }
  return best_i;
}

TEST(CudaMath, GreedyIsTheSamplersChoiceWithTiesNanAndInfinities) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const std::vector<std::vector<float>> rows = {
      {1, 3, 3, 2}, {nan, 2, nan, 2}, {nan, nan, nan}, {nan, -inf, -inf, nan}, {-inf, -inf}, {1, inf, nan, inf}};
  for (const auto& row : rows)
    for (uint32_t seed = 0; seed < 5; ++seed) EXPECT_EQ(reduce_argmax(row, seed), sampling::argmax(row));
  for (uint32_t seed = 0; seed < 20; ++seed) {
    auto row = random_vector(5000, 80 + seed, -5.0f, 5.0f);
    for (float& x : row) x = std::round(x * 4.0f) / 4.0f;  // many ties
    EXPECT_EQ(reduce_argmax(row, seed), sampling::argmax(row));
  }
}

std::vector<int32_t> kept_ids(const std::vector<float>& l, Cut cut) {
  std::vector<int32_t> ids;
  for (int32_t i = 0; i < int32_t(l.size()); ++i)
    if (kept(l[size_t(i)], i, cut)) ids.push_back(i);
  return ids;
}

TEST(CudaMath, RankKeysOrderLogitsAsTheSamplerRanksThem) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> ascending = {-inf, -3e38f, -2.5f, -1e-30f, 0.0f, 1e-30f, 1.0f, 2.5f, 3e38f, inf};
  for (size_t i = 1; i < ascending.size(); ++i) EXPECT_LT(rank_key(ascending[i - 1]), rank_key(ascending[i]));
  EXPECT_EQ(rank_key(-0.0f), rank_key(0.0f));
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_FALSE(kept(nan, 0, Cut{}));
  EXPECT_FALSE(kept(-inf, 0, Cut{}));
  EXPECT_TRUE(kept(-3e38f, 0, Cut{}));
  EXPECT_TRUE(kept(1.0f, 5, Cut{rank_key(1.0f), 5}));
  EXPECT_FALSE(kept(1.0f, 6, Cut{rank_key(1.0f), 5}));
  EXPECT_TRUE(kept(1.5f, 6, Cut{rank_key(1.0f), 5}));
}

// The radix select keeps exactly the tokens the CPU's top_k and nucleus
// keep, on rows full of ties, NaN and -inf.
TEST(CudaMath, TopKAndTopPCutsKeepTheCpusTokens) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  std::mt19937 pick(5);
  for (uint32_t seed = 0; seed < 60; ++seed) {
    const size_t vocab = seed % 3 == 0 ? 50 : 5000;
    auto row = random_vector(vocab, 300 + seed, -6.0f, 6.0f);
    if (seed % 2 == 0)
      for (float& x : row) x = std::round(x * 2.0f) / 2.0f;  // many ties
    row[pick() % vocab] = nan;
    row[pick() % vocab] = -inf;
    row[pick() % vocab] = -0.0f;
    const float max = sampling::max_logit(row), inv_t = 1.0f / (0.5f + float(seed % 4) * 0.4f);
    for (int32_t k : {1, 2, 7, 40, int32_t(vocab) - 1}) {
      std::vector<sampling::Candidate> cands;
      sampling::top_k(row, k, cands);
      std::vector<int32_t> want;
      for (const auto& c : cands) want.push_back(c.second);
      std::sort(want.begin(), want.end());
      ASSERT_EQ(kept_ids(row, device_cut(row, k, 1.0f, max, inv_t)), want) << "seed " << seed << " k " << k;
    }
    std::vector<float> weights(vocab);
    const double total = sampling::softmax_weights(row, max, inv_t, weights);
    for (float top_p : {0.05f, 0.5f, 0.9f, 0.99f}) {
      std::vector<sampling::Candidate> cands;
      sampling::nucleus(row, weights, max, inv_t, (top_p - 1e-6) * total, cands);
      std::vector<int32_t> want;
      for (const auto& c : cands) want.push_back(c.second);
      std::sort(want.begin(), want.end());
      std::vector<int32_t> got;  // the CPU leaves out tokens of weight 0, which no draw picks
      for (int32_t i : kept_ids(row, device_cut(row, 0, top_p, max, inv_t)))
        if (weights[size_t(i)] > 0.0f) got.push_back(i);
      ASSERT_EQ(got, want) << "seed " << seed << " top_p " << top_p;
    }
  }
}

// penalties_kernel's two phases over one row, its 256 threads in turn.
void penalize(std::vector<float>& l, const PenaltyRow& row) {
  constexpr int32_t kLanes = 256;
  for (int32_t lane = 0; lane < kLanes; ++lane) penalize_repetition(l.data(), int32_t(l.size()), row, lane, kLanes);
  for (int32_t lane = 0; lane < kLanes; ++lane) penalize_counts(l.data(), int32_t(l.size()), row, lane, kLanes);
}

// A step launched before the previous one's sample reached the host
// penalises with that sample still on the device (PenaltyRow::pending): the
// logits are those of the CPU Sampler once it has recorded the sample, bit
// for bit, whether the sample was generated before, is only in the prompt,
// is new, or is out of the vocabulary.
TEST(CudaMath, PenaltiesCountAPendingSampleAsTheSamplerOnceRecorded) {
  const int32_t vocab = 3000;
  const std::vector<int32_t> prompt = {500, 3, 800, 3};
  for (float rep : {1.0f, 1.3f})
    for (float freq : {0.0f, 0.7f})
      for (float pres : {0.0f, -0.4f})
        for (int32_t pending : {7, 11, 500, 42, 2999, 3000, -1}) {
          SamplingParams p;
          p.repetition_penalty = rep;
          p.frequency_penalty = freq;
          p.presence_penalty = pres;
          Sampler cpu(p, prompt);
          for (int32_t t : {7, 9, 7, 11, 2000}) cpu.accept(t);
          std::vector<int32_t> ids, n;
          for (auto [t, c] : cpu.generated_counts()) {
            ids.push_back(t);
            n.push_back(c);
          }
          const auto seen = cpu.seen_tokens();
          std::vector<float> got = random_vector(size_t(vocab), uint32_t(pending + 5), -4.0f, 4.0f);
          std::vector<float> want = got;
          penalize(got, PenaltyRow{rep, freq, pres, seen.data(), int32_t(seen.size()), ids.data(), n.data(),
                                   int32_t(ids.size()), pending});
          if (pending >= 0) cpu.accept(pending);
          cpu.apply_penalties(want);
          for (int32_t i = 0; i < vocab; ++i)
            ASSERT_EQ(float_bits(got[size_t(i)]), float_bits(want[size_t(i)]))
                << "token " << i << " pending " << pending << " rep " << rep << " freq " << freq << " pres " << pres;
        }
}

// The device pipeline for one row: penalties (from the lists the runner
// would upload), then greedy or top-k, top-p and the chunked draw, as
// sampling.cu runs it.
struct DeviceSamplerModel {
  SamplingParams params;
  std::mt19937_64 rng;
  std::vector<int32_t> seen;                        // distinct prompt and generated ids
  std::vector<std::pair<int32_t, int32_t>> counts;  // generated (id, count)

  DeviceSamplerModel(const SamplingParams& p, const std::vector<int32_t>& prompt) : params(p), rng(p.seed) {
    seen = prompt;
    std::sort(seen.begin(), seen.end());
    seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
  }

  int32_t sample(std::vector<float> l) {
    const int32_t vocab = int32_t(l.size());
    std::vector<int32_t> ids, n;
    for (auto [t, c] : counts) {
      ids.push_back(t);
      n.push_back(c);
    }
    penalize(l, PenaltyRow{params.repetition_penalty, params.frequency_penalty, params.presence_penalty, seen.data(),
                           int32_t(seen.size()), ids.data(), n.data(), int32_t(ids.size()), -1});
    // The CPU Sampler draws its uniform only when it draws.
    const bool draws = params.temperature >= kGreedyTemperature;
    const double u = draws ? double(rng() >> 11) * 0x1.0p-53 : 0.0;
    const int32_t token = host_sample_row(l.data(), vocab, params.temperature, params.min_p, params.top_k,
                                          params.top_p, u);
    auto it = std::lower_bound(counts.begin(), counts.end(), std::pair<int32_t, int32_t>{token, 0});
    if (it != counts.end() && it->first == token) ++it->second;
    else counts.insert(it, {token, 1});
    auto s = std::lower_bound(seen.begin(), seen.end(), token);
    if (s == seen.end() || *s != token) seen.insert(s, token);
    return token;
  }
};

TEST(CudaMath, SamplingDrawsTheCpuSamplersIdsForTheSameSeed) {
  struct Case {
    float temperature, min_p, repetition, frequency, presence;
    int32_t top_k = 0;
    float top_p = 1.0f;
  };
  const Case cases[] = {{0.0f, 0, 1, 0, 0},
                        {1.0f, 0, 1, 0, 0},
                        {0.7f, 0.05f, 1, 0, 0},
                        {1.3f, 0, 1.2f, 0, 0},
                        {0.9f, 0.02f, 1.1f, 0.4f, 0.3f},
                        {0.0f, 0, 1.3f, 0.5f, -0.2f},
                        {1.0f, 0, 1, 0, 0, 40},
                        {1.5f, 0, 1, 0, 0, 0, 0.9f},
                        {0.8f, 0.01f, 1.1f, 0.2f, 0, 50, 0.8f},
                        {1.2f, 0, 1, 0, 0, 3, 0.5f},
                        {2.0f, 0, 1, 0, 0, 0, 0.99f}};
  const std::vector<int32_t> prompt = {3, 9, 9, 27, 100, 4000};
  int mismatches = 0, draws = 0;
  for (const Case& c : cases)
    for (int32_t vocab : {97, 32000}) {
      SamplingParams p;
      p.temperature = c.temperature;
      p.min_p = c.min_p;
      p.repetition_penalty = c.repetition;
      p.frequency_penalty = c.frequency;
      p.presence_penalty = c.presence;
      p.top_k = c.top_k;
      p.top_p = c.top_p;
      p.seed = 1234;
      p.has_seed = true;
      const std::vector<int32_t> pr(prompt.begin(), prompt.begin() + (vocab > 4000 ? 6 : 3));
      Sampler cpu(p, pr);
      DeviceSamplerModel gpu(p, pr);
      for (int step = 0; step < 60; ++step) {
        // Peaked rows that favour a few ids, so penalties and repeats matter.
        auto row = random_vector(size_t(vocab), 90 + step, -4.0f, 4.0f);
        for (int k = 0; k < 5; ++k) row[size_t((step * 7 + k * 13) % vocab)] += 6.0f;
        std::vector<float> scratch = row;
        const int32_t want = cpu.sample(scratch).token;
        const int32_t got = gpu.sample(row);
        ++draws;
        if (got != want) ++mismatches;
        ASSERT_EQ(got, want) << "temperature " << c.temperature << " top_k " << c.top_k << " top_p " << c.top_p
                             << " vocab " << vocab << " step " << step;
      }
    }
  EXPECT_EQ(mismatches, 0) << draws;
}

}  // namespace
}  // namespace conveyor::kernels::cuda
