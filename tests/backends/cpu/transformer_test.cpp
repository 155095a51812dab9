#include "backends/cpu/transformer.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <cstdio>
#include <initializer_list>
#include <random>
#include <string>
#include <string_view>

#include "kernels/cpu/paged_attention.hpp"
#include "kernels/cpu/quant_matmul.hpp"
#include "tests/kernels/cpu/isa_param.hpp"
#include "model/formats/gguf_writer.hpp"
#include "model/formats/loader.hpp"
#include "tests/backends/cpu/paged_driver.hpp"
#include "tests/backends/cpu/reference_model.hpp"
#include "tests/shared_models.hpp"

namespace conveyor {
namespace {

using testing::argmax;
using testing::PagedDriver;
using testing::ReferenceModel;

// Error of a logits row: max |got - want| / max |want|.
double row_error(const std::vector<float>& got, const std::vector<float>& want) {
  double diff = 0.0, scale = 0.0;
  for (size_t i = 0; i < want.size(); ++i) {
    diff = std::max(diff, std::abs(double(got[i]) - want[i]));
    scale = std::max(scale, std::abs(double(want[i])));
  }
  return diff / scale;
}

constexpr double kTolerance = 1e-4;

// Sequences of random tokens: a prompt of 1..max_prompt tokens, then
// `decode` more tokens that the test feeds one step at a time.
struct Workload {
  std::vector<std::vector<int32_t>> tokens;
  std::vector<int32_t> prompt_len;
  std::vector<std::vector<std::vector<float>>> reference;  // [seq][pos] logits
};

Workload make_workload(const ModelConfig& config, const ModelWeights& weights, int32_t n_seqs,
                       int32_t max_prompt, int32_t decode, uint32_t seed) {
  std::mt19937 rng(seed);
  Workload w;
  for (int32_t s = 0; s < n_seqs; ++s) {
    const int32_t prompt = std::uniform_int_distribution<int32_t>(1, max_prompt)(rng);
    std::vector<int32_t> t(size_t(prompt + decode));
    for (int32_t& x : t) x = std::uniform_int_distribution<int32_t>(0, config.vocab_size - 1)(rng);
    ReferenceModel ref(config, weights);
    std::vector<std::vector<float>> logits;
    for (int32_t x : t) logits.push_back(ref.step(x));
    w.tokens.push_back(std::move(t));
    w.prompt_len.push_back(prompt);
    w.reference.push_back(std::move(logits));
  }
  return w;
}

// Runs the first n_seqs sequences of `w` through the paged forward pass:
// prompts in chunks (logits after every chunk), then the decode tokens one
// step at a time; every logits row is compared with the reference.
void check_paged_against_reference(Transformer& model, const Workload& w, int32_t n_seqs,
                                   int32_t block_size, int32_t chunk, uint32_t seed) {
  SCOPED_TRACE("block_size " + std::to_string(block_size) + ", chunk " + std::to_string(chunk) +
               ", " + std::to_string(n_seqs) + " sequences");
  int32_t blocks = 0;
  for (int32_t s = 0; s < n_seqs; ++s)
    blocks += int32_t(w.tokens[size_t(s)].size() + block_size - 1) / block_size;
  PagedDriver driver(model, block_size, blocks + 5, seed);
  for (int32_t s = 0; s < n_seqs; ++s) {
    const std::vector<int32_t>& t = w.tokens[size_t(s)];
    driver.add({t.begin(), t.begin() + w.prompt_len[size_t(s)]});
  }
  double worst = 0.0;
  size_t rows_checked = 0;
  auto check = [&](const std::vector<PagedDriver::Row>& rows) {
    for (const PagedDriver::Row& r : rows) {
      const double e = row_error(r.logits, w.reference[size_t(r.seq)][size_t(r.pos)]);
      worst = std::max(worst, e);
      ++rows_checked;
      ASSERT_LT(e, kTolerance) << "sequence " << r.seq << " position " << r.pos;
    }
  };
  while (driver.pending()) {
    check(driver.step(chunk, /*logits_every_span=*/true));
    if (::testing::Test::HasFatalFailure()) return;
  }
  const size_t decode = w.tokens[0].size() - size_t(w.prompt_len[0]);
  for (size_t d = 0; d < decode; ++d) {
    for (int32_t s = 0; s < n_seqs; ++s)
      driver.append(s, w.tokens[size_t(s)][size_t(w.prompt_len[size_t(s)]) + d]);
    const std::vector<PagedDriver::Row> rows = driver.step(1);
    EXPECT_EQ(rows.size(), size_t(n_seqs));  // every sequence decodes every step
    check(rows);
    if (::testing::Test::HasFatalFailure()) return;
  }
  EXPECT_GT(rows_checked, size_t(0));
  ::testing::Test::RecordProperty(
      "worst_error_bs" + std::to_string(block_size) + "_chunk" + std::to_string(chunk),
      std::to_string(worst));
}

// Every block size × chunk size, with batches of 1 to 64 sequences.
void check_all_layouts(const ModelConfig& config, const ModelWeights& weights, uint32_t seed) {
  const Workload w = make_workload(config, weights, 64, 50, 3, seed);
  Transformer model(config, weights, 2);
  const int32_t batch_sizes[] = {1, 64, 9, 33, 2, 64, 17, 5, 64};
  int combo = 0;
  for (int32_t block_size : {1, 16, 32})
    for (int32_t chunk : {1, 7, 64}) {
      check_paged_against_reference(model, w, batch_sizes[combo], block_size, chunk,
                                    seed + uint32_t(combo));
      ++combo;
      if (::testing::Test::HasFatalFailure()) return;
    }
}

ModelConfig small_config() {
  ModelConfig c;
  c.name = "small-mha";
  c.dim = 48;
  c.hidden_dim = 100;
  c.n_layers = 2;
  c.n_heads = 4;
  c.n_kv_heads = 4;
  c.vocab_size = 130;
  c.context_length = 128;
  return c;
}

TEST(Transformer, MultiHeadAdjacentPairsTiedMatchesReference) {
  const ModelConfig c = small_config();
  check_all_layouts(c, make_random_weights(c, 1), 11);
}

TEST(Transformer, GroupedQueryHalfSplitPartialRopeUntiedMatchesReference) {
  ModelConfig c = small_config();
  c.name = "small-gqa";
  c.dim = 64;
  c.n_layers = 3;
  c.n_heads = 8;
  c.n_kv_heads = 2;
  c.rope_layout = RopeLayout::half_split;
  c.rope_dim = 4;  // of head_dim 8
  c.rope_theta = 500000.0f;
  c.rms_eps = 1e-6f;
  c.tied_embeddings = false;
  check_all_layouts(c, make_random_weights(c, 2), 22);
}

// The families' switches (model/config.hpp), each against the reference.
TEST(Transformer, Qwen2BiasesMatchReference) {
  ModelConfig c = small_config();
  c.architecture = "qwen2";
  c.n_kv_heads = 2;
  c.rope_layout = RopeLayout::half_split;
  c.rope_theta = 1e6f;
  c.qkv_bias = true;
  check_all_layouts(c, make_random_weights(c, 4), 44);
}

TEST(Transformer, Qwen3HeadNormsAndWideHeadsMatchReference) {
  ModelConfig c = small_config();
  c.architecture = "qwen3";
  c.n_kv_heads = 2;
  c.head_size = 16;  // q_dim 64 > dim 48, as in Qwen 3
  c.rope_layout = RopeLayout::half_split;
  c.qk_norm = true;
  c.tied_embeddings = false;
  check_all_layouts(c, make_random_weights(c, 5), 55);
}

TEST(Transformer, Llama31FrequencyFactorsAndLinearScalingMatchReference) {
  ModelConfig c = small_config();
  c.rope_theta = 500000.0f;
  c.rope_scaling = RopeScaling::linear;
  c.rope_scaling_factor = 4.0f;
  ModelWeights w = make_random_weights(c, 6);
  for (int32_t i = 0; i < c.rotary_dim() / 2; ++i)
    w.rope_freq_factors.push_back(1.0f + 7.0f * float(i) / float(c.rotary_dim() / 2));
  check_all_layouts(c, w, 66);
}

// The logits after a generated token are bit for bit the same whether it
// was decoded step by step, or recomputed in chunks with its prompt (as
// after a preemption, or on the node a request is resumed on), or the
// prompt was chunked otherwise, among other sequences or alone. (On AVX-512
// CPUs prompt chunks take the attention tiles, generated tokens not.) The KV
// cache holds `dtype`.
void check_generated_match_decode_steps(Transformer& model, KvDtype dtype = KvDtype::f32) {
  const int32_t vocab = model.config().vocab_size;
  std::mt19937 rng(9);
  auto random_tokens = [&](size_t n) {
    std::vector<int32_t> t(n);
    for (int32_t& x : t) x = std::uniform_int_distribution<int32_t>(0, vocab - 1)(rng);
    return t;
  };
  const std::vector<int32_t> prompt = random_tokens(37);
  std::vector<std::vector<int32_t>> others;
  for (size_t n : {5, 60, 1, 19}) others.push_back(random_tokens(n));
  constexpr int32_t kNew = 20;

  // Decoded: the prompt in chunks of 7 beside the others, then a token a step.
  std::vector<std::vector<float>> decoded;  // logits after prompt.size() - 1 + i
  {
    PagedDriver driver(model, 16, 64, 1, dtype);
    driver.add(prompt);
    for (const auto& o : others) driver.add(o);
    while (int32_t(decoded.size()) <= kNew)
      for (PagedDriver::Row& r : driver.step(7)) {
        driver.append(r.seq, argmax(r.logits));
        if (r.seq == 0) decoded.push_back(std::move(r.logits));
      }
  }
  // Recomputed: the prompt and its generated tokens in chunks, alone or beside the others.
  std::vector<int32_t> all = prompt;
  for (int32_t i = 0; i < kNew; ++i) all.push_back(argmax(decoded[size_t(i)]));
  for (int32_t chunk : {64, 5, 1})
    for (bool alone : {true, false}) {
      SCOPED_TRACE("chunks of " + std::to_string(chunk) + (alone ? ", alone" : ", among others"));
      PagedDriver driver(model, 16, 64, 2, dtype);
      driver.add(all, int32_t(prompt.size()));
      if (!alone)
        for (const auto& o : others) driver.add(o);
      size_t compared = 0;
      while (driver.pending())
        for (const PagedDriver::Row& r : driver.step(chunk, /*logits_every_span=*/true)) {
          const int32_t i = r.pos - int32_t(prompt.size() - 1);
          if (r.seq != 0 || i < 0) continue;
          ASSERT_EQ(r.logits, decoded[size_t(i)]) << "position " << r.pos;
          ++compared;
        }
      EXPECT_GE(compared, chunk == 64 ? size_t(1) : size_t(4));
    }
}

// Heads of 16, 8 query heads a kv head, float weights.
TEST(Transformer, GeneratedPositionsMatchDecodeStepsBitForBit) {
  ModelConfig c = small_config();
  c.name = "small-tiled";
  c.dim = 128;
  c.n_heads = 8;
  c.n_kv_heads = 1;
  c.head_size = 16;
  Transformer model(c, make_random_weights(c, 8), 2);
  check_generated_match_decode_steps(model);
}

// The same with the KV cache in bf16 and q8_0, heads of 64 and 128 and 1, 4
// or 8 query heads a kv head: the shapes whose decode scores are dot products
// of the cache's elements where the CPU has them (vdpbf16ps on AVX512-BF16
// with 4 query heads a kv head or more, vpdpbusd on AVX512-VNNI with any, the
// queries rounded to bf16 or int8), widened otherwise; the prompt tiles take
// them too.
TEST(Transformer, DotProductKvGeneratedPositionsMatchDecodeStepsBitForBit) {
  for (int32_t head : {64, 128})
    for (int32_t group : {1, 4, 8})
      for (KvDtype dtype : {KvDtype::bf16, KvDtype::q8_0}) {
        SCOPED_TRACE("heads of " + std::to_string(head) + ", " + std::to_string(group) + " a kv head, " +
                     kv_dtype_name(dtype));
        ModelConfig c = small_config();
        c.name = "small-dot";
        c.n_kv_heads = 1;
        c.n_heads = group;
        c.head_size = head;
        c.dim = 128;
        Transformer model(c, make_random_weights(c, uint64_t(head + group)), 2);
        check_generated_match_decode_steps(model, dtype);
        if (HasFatalFailure()) return;
      }
}

// The same through the int8 products of quantized files (heads of 32, 2 and
// 4 query heads a kv head; every integer type) and the half-float products
// of F16 and BF16 ones, on each path the products take: a batch's rows and a
// decode step's must get the same bits from them too (AMX tiles, on CPUs without them emulated: from
// kernels::amx_min_rows() rows for the integer types, every row for BF16).
TEST(Transformer, QuantizedGeneratedPositionsMatchDecodeStepsBitForBit) {
  using kernels::Isa;
  for (const char* name : {"tiny-llama2-q4_k_m.gguf", "tiny-llama2-q8_0.gguf", "tiny-llama3-q4_k_m.gguf",
                           "tiny-llama2-q5_k_m.gguf", "tiny-llama2-q4_0.gguf", "tiny-random-llama-f16.gguf",
                           "tiny-llama2-q8_0.gguf as bf16"}) {
    const std::string_view file = std::string_view(name).substr(0, std::string_view(name).find(' '));
    const std::string path = test::shared_model_path(std::string(file));
    if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " not found (see ../shared/models/README.md)";
    SCOPED_TRACE(name);
    LoadOptions options;
    options.dequantize = file != name;  // written again below with BF16 matrices
    auto loaded = load_model(path, options);
    ASSERT_TRUE(loaded) << loaded.error().message;
    if (file != name) {
      const std::string bf16_path = ::testing::TempDir() + "transformer_test_bf16.gguf";
      const Status written = write_gguf(*loaded, bf16_path, GgufWriteOptions{.file_type = GgufFileType::bf16});
      ASSERT_TRUE(written) << written.error().message;
      loaded = load_model(bf16_path);
      std::filesystem::remove(bf16_path);
      ASSERT_TRUE(loaded) << loaded.error().message;
    }
    for (Isa isa : {Isa::avx2, Isa::avxvnni, Isa::avx512, Isa::amx}) {
      if (!kernels::testing::isa_testable(isa)) continue;
      SCOPED_TRACE(kernels::isa_name(isa));
      kernels::force_isa(isa);
      Transformer model(loaded->config, loaded->weights, 2);
      check_generated_match_decode_steps(model);
      kernels::force_isa(kernels::detected_isa());
      if (HasFatalFailure()) return;
    }
  }
}

TEST(Transformer, ProfileCountsCallsAndPhases) {
  const ModelConfig c = small_config();
  Transformer model(c, make_random_weights(c, 3), 2);
  ForwardProfile profile;
  model.set_profile(&profile);
  PagedDriver driver(model, 16, 8, 1);
  driver.add({1, 2, 3, 4, 5});
  driver.add({6, 7});
  EXPECT_EQ(driver.step(64).size(), size_t(2));
  model.set_profile(nullptr);
  driver.append(0, 9);
  driver.step(1);  // not counted
  EXPECT_EQ(profile.calls, 1);
  EXPECT_GT(profile.matmul, 0.0);
  EXPECT_GT(profile.attention, 0.0);
  EXPECT_GT(profile.logits, 0.0);
}

std::string stories_path() { return test::shared_model_path("stories260K.bin"); }

TEST(Transformer, Stories260KMatchesReference) {
  if (!std::filesystem::exists(stories_path()))
    GTEST_SKIP() << stories_path() << " not found (see ../shared/models/README.md)";
  auto loaded = load_model(stories_path());
  ASSERT_TRUE(loaded) << loaded.error().message;
  ASSERT_EQ(loaded->config.n_kv_heads, 4);  // grouped-query: 8 query heads
  check_all_layouts(loaded->config, loaded->weights, 33);
}

// Greedy continuation of `prompt` (40 tokens) while `others` run in the same
// batches and generate too; the prompt is fed `chunk` tokens per step.
std::vector<int32_t> greedy(Transformer& model, const std::vector<int32_t>& prompt,
                            const std::vector<std::vector<int32_t>>& others, int32_t block_size,
                            int32_t chunk) {
  constexpr int32_t kNew = 40;
  int32_t blocks = 0;
  for (const auto& o : others) blocks += int32_t(o.size() + kNew) / block_size + 1;
  blocks += int32_t(prompt.size() + kNew) / block_size + 1;
  PagedDriver driver(model, block_size, blocks, 7);
  std::vector<int32_t> ids(1, driver.add(prompt));
  for (const auto& o : others) ids.push_back(driver.add(o));
  std::vector<int32_t> generated(ids.size(), 0);
  while (generated[0] < kNew) {
    for (const PagedDriver::Row& r : driver.step(chunk))
      if (generated[size_t(r.seq)] < kNew) {
        driver.append(r.seq, argmax(r.logits));
        ++generated[size_t(r.seq)];
      }
  }
  const std::vector<int32_t>& all = driver.tokens(0);
  return {all.begin() + ptrdiff_t(prompt.size()), all.begin() + ptrdiff_t(prompt.size()) + kNew};
}

TEST(Transformer, Stories260KGreedyIsIndependentOfBatchAndChunking) {
  if (!std::filesystem::exists(stories_path()))
    GTEST_SKIP() << stories_path() << " not found (see ../shared/models/README.md)";
  auto loaded = load_model(stories_path());
  ASSERT_TRUE(loaded) << loaded.error().message;
  const std::vector<int32_t> prompt = {1, 403, 407, 261, 378, 418, 270, 324, 410, 290, 345};

  ReferenceModel ref(loaded->config, loaded->weights);
  std::vector<float> logits;
  for (int32_t t : prompt) logits = ref.step(t);
  std::vector<int32_t> expected;
  for (int i = 0; i < 40; ++i) {
    expected.push_back(argmax(logits));
    logits = ref.step(expected.back());
  }

  Transformer model(loaded->config, loaded->weights, 2);
  EXPECT_EQ(greedy(model, prompt, {}, 16, 64), expected) << "alone, whole prompt";
  std::mt19937 rng(5);
  std::vector<std::vector<int32_t>> others(31);
  for (auto& o : others) {
    o.resize(std::uniform_int_distribution<size_t>(1, 40)(rng));
    for (int32_t& t : o) t = std::uniform_int_distribution<int32_t>(0, 511)(rng);
  }
  EXPECT_EQ(greedy(model, prompt, others, 16, 8), expected) << "among 31 others";
  EXPECT_EQ(greedy(model, prompt, {}, 1, 3), expected) << "chunks of 3, block size 1";
  EXPECT_EQ(greedy(model, prompt, others, 32, 1), expected) << "token by token among others";
}

// How far logits move when the KV cache holds `dtype` instead of f32: logits
// at every position of 32 sequences (a random prompt of tokens in
// [2, vocab_end), then f32's greedy continuation), each dtype reading the
// same tokens.
struct KvDtypeDrift {
  double mean_error = 0, worst_error = 0;  // max |d| / max |f32| per row
  size_t rows = 0, agree = 0;              // positions, and those whose argmax agrees
  size_t clear = 0, clear_agree = 0;       // the same where f32's top two are 5% apart
  std::string summary;
};

std::vector<KvDtypeDrift> kv_dtype_drift(Transformer& model, int32_t vocab_end,
                                         std::initializer_list<KvDtype> dtypes) {
  constexpr int32_t kSeqs = 32, kNew = 64, kBlock = 16;
  const int32_t blocks = kSeqs * (40 + kNew + kBlock) / kBlock;
  std::mt19937 rng(11);
  std::vector<std::vector<int32_t>> seqs(kSeqs);
  {
    PagedDriver driver(model, kBlock, blocks, 3);
    for (auto& s : seqs) {
      s.resize(std::uniform_int_distribution<size_t>(2, 40)(rng));
      for (int32_t& t : s) t = std::uniform_int_distribution<int32_t>(2, vocab_end - 1)(rng);
      s[0] = 1;  // BOS
      driver.add(s);
    }
    for (int32_t i = 0; i < kNew; ++i)
      for (const PagedDriver::Row& r : driver.step(64)) driver.append(r.seq, argmax(r.logits));
    for (int32_t s = 0; s < kSeqs; ++s) seqs[size_t(s)] = driver.tokens(s);
  }
  // Logits after every token, token by token: [seq][pos].
  auto all_logits = [&](KvDtype dtype) {
    PagedDriver driver(model, kBlock, blocks, 5, dtype);
    std::vector<std::vector<std::vector<float>>> out(kSeqs);
    for (const auto& s : seqs) driver.add({s[0]});
    for (size_t pos = 0;; ++pos) {
      bool any = false;
      for (PagedDriver::Row& r : driver.step(1)) {
        out[size_t(r.seq)].push_back(std::move(r.logits));
        const auto& s = seqs[size_t(r.seq)];
        if (pos + 1 < s.size()) {
          driver.append(r.seq, s[pos + 1]);
          any = true;
        }
      }
      if (!any) break;
    }
    return out;
  };
  const auto f32 = all_logits(KvDtype::f32);
  std::vector<KvDtypeDrift> drifts;
  for (KvDtype dtype : dtypes) {
    const auto got = all_logits(dtype);
    KvDtypeDrift d;
    double sum = 0.0;
    for (int32_t s = 0; s < kSeqs; ++s)
      for (size_t p = 0; p < f32[size_t(s)].size(); ++p) {
        const std::vector<float>& want = f32[size_t(s)][p];
        const double e = row_error(got[size_t(s)][p], want);
        d.worst_error = std::max(d.worst_error, e);
        sum += e;
        ++d.rows;
        const bool same = argmax(got[size_t(s)][p]) == argmax(want);
        d.agree += same;
        std::vector<float> sorted = want;
        std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<>());
        if (sorted[0] - sorted[1] > 0.05f * std::abs(sorted[0])) {
          ++d.clear;
          d.clear_agree += same;
        }
      }
    d.mean_error = sum / double(d.rows);
    char summary[256];
    std::snprintf(summary, sizeof summary,
                  "%s KV: logits error (max |d| / max |f32|) mean %.2e, worst %.2e; argmax agrees at %zu of "
                  "%zu positions, %zu of %zu where f32's top two are 5%% apart",
                  kv_dtype_name(dtype), d.mean_error, d.worst_error, d.agree, d.rows, d.clear_agree, d.clear);
    d.summary = summary;
    ::testing::Test::RecordProperty(std::string("summary_") + kv_dtype_name(dtype), summary);
    drifts.push_back(std::move(d));
  }
  return drifts;
}

// The KV cache in f16 and bf16 against f32 on stories260K. Rounding keys and
// values to 10 (f16) or 7 (bf16) mantissa bits moves the logits by about
// 0.1% (f16) or 1% (bf16) of their scale; the argmax changes only where the
// top two nearly tie.
TEST(Transformer, Stories260KHalfPrecisionKvStaysClose) {
  if (!std::filesystem::exists(stories_path()))
    GTEST_SKIP() << stories_path() << " not found (see ../shared/models/README.md)";
  auto loaded = load_model(stories_path());
  ASSERT_TRUE(loaded) << loaded.error().message;
  Transformer model(loaded->config, loaded->weights, 2);
  const auto drifts = kv_dtype_drift(model, 512, {KvDtype::f16, KvDtype::bf16});
  for (size_t i = 0; i < drifts.size(); ++i) {
    const KvDtypeDrift& d = drifts[i];
    // Measured (f16, bf16): mean error 1.2e-3, 9.7e-3; worst 1.0e-2, 6.3e-2;
    // argmax agreement 2769 and 2725 of 2770; every clear position agrees.
    const bool f16 = i == 0;
    EXPECT_LT(d.mean_error, f16 ? 3e-3 : 2e-2) << d.summary;
    EXPECT_LT(d.worst_error, f16 ? 3e-2 : 0.15) << d.summary;
    EXPECT_GE(double(d.agree), double(d.rows) * (f16 ? 0.995 : 0.97)) << d.summary;
    EXPECT_EQ(d.clear_agree, d.clear) << d.summary;
    EXPECT_GT(d.clear, d.rows / 2) << d.summary;
  }
}

// The KV cache in q8_0 (8 bits and a scale per 32 values) against f32, with
// f16 beside it, on a file whose heads are 32 wide (stories260K's are 8):
// Llama 2's shape with random weights, quantized as Q4_0.
TEST(Transformer, Q8KvStaysClose) {
  const std::string path = test::shared_model_path("tiny-llama2-q4_0.gguf");
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " not found (see ../shared/models/README.md)";
  auto loaded = load_model(path);
  ASSERT_TRUE(loaded) << loaded.error().message;
  ASSERT_EQ(loaded->config.head_dim() % 32, 0);
  Transformer model(loaded->config, loaded->weights, 2);
  const auto drifts = kv_dtype_drift(model, loaded->config.vocab_size, {KvDtype::f16, KvDtype::q8_0});
  const KvDtypeDrift &f16 = drifts[0], &q8 = drifts[1];
  // Measured (f16, q8_0): mean error 2.2e-2, 3.7e-2; worst 4.1e-2, 7.6e-2;
  // argmax agreement 2621 and 2532 of 2770 (random weights: flat logits, many
  // near ties); every clear position agrees. q8_0 moves the logits less than
  // twice as far as f16 does.
  EXPECT_LT(q8.mean_error, 0.1) << q8.summary;
  EXPECT_LT(q8.mean_error, 3 * f16.mean_error) << q8.summary << "; " << f16.summary;
  EXPECT_LT(q8.worst_error, 0.2) << q8.summary;
  EXPECT_GE(double(q8.agree), double(q8.rows) * 0.85) << q8.summary;
  EXPECT_EQ(q8.clear_agree, q8.clear) << q8.summary;
  EXPECT_GT(q8.clear, q8.rows / 4) << q8.summary;
}

// The q8_0 cache on heads of 64, 4 and 1 query heads a kv head, where
// AVX512-VNNI CPUs take its scores as int8 dot products with the queries
// rounded to int8 (kernels/cpu/paged_attention_dot.inc): the logits stay as
// close to f32's as with the keys widened to float (measured on a Zen 5: mean
// error 4.3e-4 against 4.2e-4 widened with either, worst 1.2e-3 and 1.1e-3
// against 1.2e-3 and 1.0e-3; the scores scaled 30% wrong made it 3.9e-3 and
// 1.0e-2). Where the CPU has no such products both runs widen and agree
// exactly.
TEST(Transformer, Q8KvDotProductsStayAsCloseAsWidened) {
  for (int32_t kv_heads : {2, 8}) {
    ModelConfig c = small_config();
    c.name = "small-q8-dot";
    c.dim = 256;
    c.hidden_dim = 512;
    c.n_heads = 8;
    c.n_kv_heads = kv_heads;
    c.head_size = 64;
    c.vocab_size = 512;
    Transformer model(c, make_random_weights(c, 12), 2);
    const bool dots = kernels::attention_dot_products(KvDtype::q8_0);
    const KvDtypeDrift dot = kv_dtype_drift(model, c.vocab_size, {KvDtype::q8_0})[0];
    kernels::set_attention_dot_products(false);
    const KvDtypeDrift widened = kv_dtype_drift(model, c.vocab_size, {KvDtype::q8_0})[0];
    kernels::set_attention_dot_products(true);
    const std::string both = std::to_string(8 / kv_heads) + " query heads a kv head, " +
                             (dots ? "int8 dot products: " : "no int8 dot products here: ") + dot.summary +
                             "; widened: " + widened.summary;
    RecordProperty("summary_" + std::to_string(8 / kv_heads) + "_heads_a_kv_head", both);
    SCOPED_TRACE(both);
    if (!dots) {
      EXPECT_EQ(dot.mean_error, widened.mean_error);
    }
    EXPECT_LT(dot.mean_error, 1.25 * widened.mean_error);
    EXPECT_LT(dot.worst_error, 1.5 * widened.worst_error);
    EXPECT_GE(double(dot.agree), double(widened.agree) * 0.97);
    EXPECT_EQ(dot.clear_agree, dot.clear);
    EXPECT_GT(dot.clear, dot.rows / 4);
  }
}

}  // namespace
}  // namespace conveyor
