// Files written by `conveyor convert` in every type load back and run: the
// logits of each stay within that format's expected error of the float32
// source. One random model whose rows fit every block size (dim 256, hidden
// 768, like the shared llama.cpp-made files), written as each file type in
// memory, loaded back through the GGUF reader and the loader's path (weights
// kept encoded), and run through the forward pass next to the float32 model.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <numeric>

#include "model/formats/gguf_llama.hpp"
#include "model/formats/gguf_reader.hpp"
#include "model/formats/gguf_writer.hpp"
#include "backends/cpu/transformer.hpp"
#include "tests/model/formats/formats_test_util.hpp"

namespace conveyor {
namespace {

LoadedModel random_model() {
  LoadedModel m;
  ModelConfig& c = m.config;
  c.name = "roundtrip";
  c.dim = 256;
  c.hidden_dim = 768;
  c.n_layers = 2;
  c.n_heads = 8;
  c.n_kv_heads = 4;
  c.vocab_size = 512;
  c.context_length = 256;
  c.tied_embeddings = false;
  m.weights = make_random_weights(c, 11);
  m.source = "random";
  return m;
}

// Logits after each of `prompt`'s positions, concatenated.
std::vector<float> logits(const LoadedModel& m, const std::vector<int32_t>& prompt) {
  Transformer t(m.config, m.weights, 2);
  KvCache kv(KvCacheShape::for_model(m.config, 16, 4));
  std::vector<int32_t> table(4);
  std::iota(table.begin(), table.end(), 0);
  std::vector<float> all, step;
  ForwardBatch batch;
  for (size_t pos = 0; pos < prompt.size(); ++pos) {
    batch.clear();
    batch.add_sequence(std::span(prompt).subspan(pos, 1), int32_t(pos), table, true);
    t.forward(batch, kv, step);
    all.insert(all.end(), step.begin(), step.end());
  }
  return all;
}

struct Case {
  const char* type;
  double max_relative_rms;  // RMS(logit error) / RMS(logit), bounded a little above measurement
};

class ConvertRoundTrip : public ::testing::TestWithParam<Case> {};

TEST_P(ConvertRoundTrip, LogitsStayWithinTheFormatsError) {
  const Case c = GetParam();
  const LoadedModel source = random_model();
  std::vector<int32_t> prompt(40);
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = int32_t((i * 37 + 5) % 512);
  const std::vector<float> want = logits(source, prompt);

  auto type = parse_gguf_file_type(c.type);
  ASSERT_TRUE(type) << type.error().message;
  GgufWriteOptions options;
  options.file_type = *type;
  auto bytes = serialize_gguf(source, options);
  ASSERT_TRUE(bytes) << bytes.error().message;
  auto storage = std::make_shared<const std::vector<uint8_t>>(std::move(bytes).value());
  auto file = parse_gguf(*storage, std::string("roundtrip.") + c.type + ".gguf");
  ASSERT_TRUE(file) << file.error().message;
  file->storage = storage;
  auto back = llama_from_gguf(*file);
  ASSERT_TRUE(back) << back.error().message;
  if (std::string(c.type) != "f32") {  // kept encoded, not expanded to float32
    EXPECT_NE(back->weights.layers[0].w2.type, WeightType::f32);
  }
  const std::vector<float> got = logits(*back, prompt);

  ASSERT_EQ(got.size(), want.size());
  const double relative = test::rms_relative_error(want, got);
  std::cout << c.type << ": RMS logit error / RMS logit = " << relative << "\n";
  EXPECT_LE(relative, c.max_relative_rms);
}

// Which weights a model has: the same file loaded twice agrees, another
// quantization of it or other weights of the same shape differ (a router
// refuses a node whose fingerprint is not its own).
TEST(WeightsFingerprint, TellsFilesAndWeightsApart) {
  const LoadedModel source = random_model();
  auto load_as = [&](const char* name) {
    GgufWriteOptions options;
    options.file_type = *parse_gguf_file_type(name);
    auto storage = std::make_shared<const std::vector<uint8_t>>(serialize_gguf(source, options).value());
    auto file = parse_gguf(*storage, std::string("fingerprint.") + name + ".gguf");
    file->storage = storage;
    return weights_fingerprint(llama_from_gguf(*file)->weights);
  };
  const uint64_t q8 = load_as("q8_0");
  EXPECT_EQ(load_as("q8_0"), q8);
  EXPECT_NE(load_as("q4_0"), q8);
  EXPECT_NE(load_as("f16"), q8);
  EXPECT_EQ(weights_fingerprint(source.weights), weights_fingerprint(random_model().weights));
  EXPECT_NE(weights_fingerprint(source.weights), weights_fingerprint(make_random_weights(source.config, 12)));
  EXPECT_NE(weights_fingerprint(source.weights), 0u);
}

INSTANTIATE_TEST_SUITE_P(Types, ConvertRoundTrip,
                         // Measured: 0, 2.9e-4, 2.3e-3, 8.0e-3, 2.1e-2, 3.5e-2, 6.6e-2, 7.9e-2
                         // (the integer types include int8 activations, per block of 32).
                         ::testing::Values(Case{"f32", 1e-6}, Case{"f16", 1e-3},
                                           Case{"bf16", 5e-3}, Case{"q8_0", 1.5e-2},
                                           Case{"q6_k", 3e-2}, Case{"q5_k_m", 5e-2},
                                           Case{"q4_k_m", 9e-2}, Case{"q4_0", 1.1e-1}),
                         [](const auto& info) { return std::string(info.param.type); });

}  // namespace
}  // namespace conveyor
