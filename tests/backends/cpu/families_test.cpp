// Each model family written as a GGUF file, loaded back and run, against the
// double-precision reference (reference_model.hpp) on the weights that were
// written. Qwen 3 has no llama.cpp reference file here; this is its test.
// The RoPE frequencies of the scaled variants are checked on their own.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <numeric>
#include <unistd.h>

#include "model/formats/gguf_writer.hpp"
#include "model/formats/loader.hpp"
#include "model/rope_scaling.hpp"
#include "backends/cpu/transformer.hpp"
#include "tests/backends/cpu/reference_model.hpp"

namespace conveyor {
namespace {

ModelConfig family_config(const std::string& architecture) {
  ModelConfig c;
  c.name = "tiny-" + architecture;
  c.architecture = architecture;
  c.dim = 64;
  c.hidden_dim = 96;
  c.n_layers = 2;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.vocab_size = 97;
  c.context_length = 256;
  c.rms_eps = 1e-6f;
  c.tied_embeddings = true;
  if (architecture != "llama") {
    c.rope_layout = RopeLayout::half_split;
    c.rope_theta = 1e6f;
  }
  if (architecture == "qwen2") c.qkv_bias = true;
  if (architecture == "qwen3") {
    c.qk_norm = true;
    c.head_size = 32;  // q_dim 128 > dim 64, as in Qwen 3
    c.tied_embeddings = false;
  }
  return c;
}

// Largest |log-softmax difference| between two logits rows.
double logprob_error(const std::vector<float>& got, const std::vector<float>& want) {
  auto lse = [](const std::vector<float>& v) {
    double m = *std::max_element(v.begin(), v.end()), s = 0;
    for (float x : v) s += std::exp(double(x) - m);
    return m + std::log(s);
  };
  const double lg = lse(got), lw = lse(want);
  double worst = 0;
  for (size_t i = 0; i < want.size(); ++i)
    worst = std::max(worst, std::abs((got[i] - lg) - (want[i] - lw)));
  return worst;
}

// Writes `m` as `type`, loads it, and compares 40 positions of a prompt with
// the reference on the original weights.
double file_error(const LoadedModel& m, GgufFileType type) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("conveyor_family_" + m.config.architecture + "_" +
                             std::to_string(::getpid()) + ".gguf")).string();
  GgufWriteOptions options;
  options.file_type = type;
  if (Status s = write_gguf(m, path, options); !s) {
    ADD_FAILURE() << s.error().message;
    return 1e9;
  }
  auto loaded = load_model(path);
  std::filesystem::remove(path);
  if (!loaded) {
    ADD_FAILURE() << loaded.error().message;
    return 1e9;
  }
  const ModelConfig& c = loaded->config;
  EXPECT_EQ(c.architecture, m.config.architecture);
  EXPECT_EQ(c.qkv_bias, m.config.qkv_bias);
  EXPECT_EQ(c.qk_norm, m.config.qk_norm);
  EXPECT_EQ(c.head_dim(), m.config.head_dim());
  EXPECT_EQ(c.rope_layout, m.config.rope_layout);
  EXPECT_EQ(c.rope_scaling, m.config.rope_scaling);
  EXPECT_EQ(loaded->weights.rope_freq_factors, m.weights.rope_freq_factors);

  Transformer t(c, std::move(loaded->weights), 2);
  testing::ReferenceModel ref(m.config, m.weights);
  const int32_t n = 40, bs = 16;
  KvCache kv(KvCacheShape::for_model(c, bs, (n + bs - 1) / bs));
  std::vector<int32_t> table(size_t((n + bs - 1) / bs));
  std::iota(table.begin(), table.end(), 0);
  std::vector<float> logits;
  ForwardBatch batch;
  double worst = 0;
  for (int32_t pos = 0; pos < n; ++pos) {
    const int32_t token = (pos * 31 + 7) % c.vocab_size;
    batch.clear();
    batch.add_sequence(std::span(&token, 1), pos, std::span(table).first(size_t(pos / bs + 1)), true);
    t.forward(batch, kv, logits);
    worst = std::max(worst, logprob_error(logits, ref.step(token)));
  }
  return worst;
}

LoadedModel family_model(const std::string& architecture, uint64_t seed) {
  LoadedModel m;
  m.config = family_config(architecture);
  m.weights = make_random_weights(m.config, seed);
  return m;
}

TEST(ModelFamilies, Qwen3FileMatchesReference) {
  const LoadedModel m = family_model("qwen3", 31);
  EXPECT_LT(file_error(m, GgufFileType::all_f32), 1e-4);
  // Q8_0 weights and int8 activations: measured 0.03 here and 0.16 for the
  // tied qwen2 model below, whose unit-scale embedding doubles as the
  // classifier and makes the logits large (llama.cpp's own Q8_0 file: 0.16).
  EXPECT_LT(file_error(m, GgufFileType::q8_0), 0.25);
}

TEST(ModelFamilies, Qwen2FileMatchesReference) {
  const LoadedModel m = family_model("qwen2", 32);
  EXPECT_LT(file_error(m, GgufFileType::all_f32), 1e-4);
  EXPECT_LT(file_error(m, GgufFileType::q8_0), 0.25);
}

TEST(ModelFamilies, Llama31FileWithFrequencyFactorsMatchesReference) {
  LoadedModel m = family_model("llama", 33);
  m.config.rope_theta = 500000.0f;
  for (int32_t i = 0; i < m.config.rotary_dim() / 2; ++i)
    m.weights.rope_freq_factors.push_back(i < 4 ? 1.0f : i < 12 ? 2.5f : 8.0f);
  EXPECT_LT(file_error(m, GgufFileType::all_f32), 1e-4);
}

TEST(ModelFamilies, LinearScalingFileMatchesReference) {
  LoadedModel m = family_model("qwen2", 34);
  m.config.rope_scaling = RopeScaling::linear;
  m.config.rope_scaling_factor = 4.0f;
  EXPECT_LT(file_error(m, GgufFileType::all_f32), 1e-4);
}

// YaRN (llama.cpp's ggml_rope_yarn): fast pairs keep their frequency, slow
// pairs are divided by the factor, the ramp between is linear in the pair
// index, and cos/sin grow by 1 + 0.1 ln(factor).
TEST(ModelFamilies, YarnFrequencies) {
  ModelConfig c = family_config("qwen2");
  c.head_size = 128;
  c.rope_theta = 10000.0f;
  c.rope_scaling = RopeScaling::yarn;
  c.rope_scaling_factor = 4.0f;
  c.rope_original_context = 4096;
  const RopeFrequencies r = rope_frequencies(c, {});
  ASSERT_EQ(r.pair_freqs.size(), 64u);
  EXPECT_NEAR(r.scale, 1.0 + 0.1 * std::log(4.0), 1e-12);
  // Pair i turns 4096 · freq_i / 2π times over the original context: beta_fast
  // (32) at i = 128 ln(4096 / (32 · 2π)) / (2 ln 10000) = 20.9 -> 20 (floor),
  // beta_slow (1) at 45.96 -> 46 (ceil).
  for (int32_t i = 0; i < 64; ++i) {
    const double base = std::pow(10000.0, -2.0 * i / 128);
    const double ramp = 1.0 - std::clamp((i - 20.0) / 26.0, 0.0, 1.0);
    EXPECT_NEAR(r.pair_freqs[size_t(i)] / base, ramp + (1 - ramp) / 4.0, 1e-12) << "pair " << i;
  }
  EXPECT_NEAR(r.pair_freqs[0], 1.0, 1e-12);
  EXPECT_NEAR(r.pair_freqs[63] / std::pow(10000.0, -126.0 / 128), 0.25, 1e-12);
}

}  // namespace
}  // namespace conveyor
