// Loading the shared tiny-random-llama GGUF files (F32, F16, Q8_0) end to end.
#include "model/formats/gguf_llama.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "model/formats/gguf_writer.hpp"
#include "model/formats/tensor_convert.hpp"
#include "tests/model/formats/formats_test_util.hpp"

namespace conveyor {
namespace {

// Calls f(name, a, b) for every pair of corresponding tensors.
void for_each_tensor(const ModelWeights& a, const ModelWeights& b,
                     const std::function<void(const std::string&, const std::vector<float>&,
                                              const std::vector<float>&)>& f) {
  f("token_embedding", a.token_embedding.values, b.token_embedding.values);
  f("final_norm", a.final_norm, b.final_norm);
  f("classifier", a.classifier.values, b.classifier.values);
  for (size_t i = 0; i < a.layers.size() && i < b.layers.size(); ++i) {
    const LayerWeights &x = a.layers[i], &y = b.layers[i];
    const std::string p = "layer " + std::to_string(i) + " ";
    f(p + "attn_norm", x.attn_norm, y.attn_norm);
    f(p + "wq", x.wq.values, y.wq.values);
    f(p + "wk", x.wk.values, y.wk.values);
    f(p + "wv", x.wv.values, y.wv.values);
    f(p + "wo", x.wo.values, y.wo.values);
    f(p + "ffn_norm", x.ffn_norm, y.ffn_norm);
    f(p + "w1", x.w1.values, y.w1.values);
    f(p + "w2", x.w2.values, y.w2.values);
    f(p + "w3", x.w3.values, y.w3.values);
  }
}

void expect_tiny_random_llama(const LoadedModel& m) {
  const ModelConfig& c = m.config;
  EXPECT_EQ(c.dim, 64);
  EXPECT_EQ(c.hidden_dim, 192);
  EXPECT_EQ(c.n_layers, 2);
  EXPECT_EQ(c.n_heads, 8);
  EXPECT_EQ(c.n_kv_heads, 4);
  EXPECT_EQ(c.vocab_size, 32000);
  // The files' llama.context_length is 128 (the shared README says 512; the
  // metadata is what the loader reports).
  EXPECT_EQ(c.context_length, 128);
  EXPECT_EQ(c.rotary_dim(), 8);
  EXPECT_EQ(c.rope_theta, 10000.0f);
  EXPECT_NEAR(c.rms_eps, 1e-5f, 1e-9f);
  EXPECT_EQ(c.rope_layout, RopeLayout::adjacent_pairs);
  EXPECT_FALSE(c.tied_embeddings);  // the files have output.weight
  EXPECT_EQ(c.name, "llama");       // general.name
  EXPECT_TRUE(weights_match(c, m.weights));
  EXPECT_EQ(m.eos_ids, std::vector<int32_t>{2});
  ASSERT_TRUE(m.vocabulary.has_value());
  EXPECT_EQ(m.vocabulary->pieces.size(), 32000u);
  EXPECT_EQ(m.vocabulary->pieces[2], "</s>");
  EXPECT_EQ(m.vocabulary->types[3], TokenType::byte);
  EXPECT_EQ(m.vocabulary->bos_id, 1);
  ASSERT_NE(m.tokenizer, nullptr);
  EXPECT_EQ(m.tokenizer->vocab_size(), 32000);
  EXPECT_EQ(m.tokenizer->bos_id(), 1);
  EXPECT_EQ(m.tokenizer->eos_id(), 2);
  const std::vector<int32_t> ids = m.tokenizer->encode("Hello world", true);
  ASSERT_GE(ids.size(), 2u);
  EXPECT_EQ(ids[0], 1);
  EXPECT_EQ(m.tokenizer->decode(ids), "Hello world");
}

class TinyRandomLlama : public ::testing::Test {
 protected:
  // Weights decoded to float32, to compare values across encodings.
  static LoadedModel load(const std::string& path) {
    LoadOptions options;
    options.dequantize = true;
    auto m = load_model(path, options);
    EXPECT_TRUE(m) << m.error().message;
    return m ? std::move(m).value() : LoadedModel{};
  }
};

TEST_F(TinyRandomLlama, F32LoadsWithItsShapeAndTokenizer) {
  CONVEYOR_REQUIRE_MODEL(path, "tiny-random-llama-f32.gguf");
  LoadedModel m = load(path);
  expect_tiny_random_llama(m);
  EXPECT_EQ(m.source, path);
  // Norms are stored as F32 and hold real values.
  EXPECT_TRUE(std::isfinite(m.weights.final_norm[0]));
}

TEST_F(TinyRandomLlama, F16IsTheF32RoundedToHalf) {
  CONVEYOR_REQUIRE_MODEL(f32_path, "tiny-random-llama-f32.gguf");
  CONVEYOR_REQUIRE_MODEL(f16_path, "tiny-random-llama-f16.gguf");
  LoadedModel f32 = load(f32_path), f16 = load(f16_path);
  expect_tiny_random_llama(f16);
  EXPECT_EQ(f16.vocabulary->pieces, f32.vocabulary->pieces);
  for_each_tensor(f32.weights, f16.weights,
                  [](const std::string& name, const std::vector<float>& a,
                     const std::vector<float>& b) {
                    ASSERT_EQ(a.size(), b.size()) << name;
                    size_t mismatches = 0;
                    for (size_t i = 0; i < a.size(); ++i)
                      if (half_to_float(float_to_half(a[i])) != b[i]) ++mismatches;
                    EXPECT_EQ(mismatches, 0u) << name;
                  });
}

TEST_F(TinyRandomLlama, Q8_0IsWithinOneQuantizationStep) {
  CONVEYOR_REQUIRE_MODEL(f32_path, "tiny-random-llama-f32.gguf");
  CONVEYOR_REQUIRE_MODEL(q8_path, "tiny-random-llama-q8_0.gguf");
  LoadedModel f32 = load(f32_path), q8 = load(q8_path);
  expect_tiny_random_llama(q8);
  for_each_tensor(f32.weights, q8.weights,
                  [](const std::string& name, const std::vector<float>& a,
                     const std::vector<float>& b) {
                    ASSERT_EQ(a.size(), b.size()) << name;
                    bool any_different = false;
                    for (size_t block = 0; block * 32 < a.size(); ++block) {
                      const size_t end = std::min(a.size(), block * 32 + 32);
                      float amax = 0;
                      for (size_t i = block * 32; i < end; ++i) amax = std::max(amax, std::fabs(a[i]));
                      // Half a step d = amax / 127, plus up to 127 times the F16
                      // rounding error of d (2^-11 d).
                      const float tolerance = amax / 127.0f * 0.57f + 1e-7f;
                      for (size_t i = block * 32; i < end; ++i) {
                        ASSERT_LE(std::fabs(a[i] - b[i]), tolerance) << name << " [" << i << "]";
                        any_different = any_different || a[i] != b[i];
                      }
                    }
                    // Matrices are quantized (values move); norms are stored as F32.
                    if (name.find("norm") == std::string::npos) {
                      EXPECT_TRUE(any_different) << name;
                      // conveyor's quantizer is ggml's reference: it reproduces the file.
                      std::vector<uint8_t> q(encoded_size(GgmlType::Q8_0, a.size()));
                      std::vector<float> back(a.size());
                      ASSERT_TRUE(encode_from_f32(GgmlType::Q8_0, a, q));
                      ASSERT_TRUE(decode_to_f32(GgmlType::Q8_0, q, back));
                      size_t differ = 0;
                      for (size_t i = 0; i < a.size(); ++i) differ += back[i] != b[i];
                      EXPECT_EQ(differ, 0u) << name;
                    }
                  });
}

TEST(GgufTokenizer, Gpt2VocabularyWithMerges) {
  // Byte-level BPE: "Ġ" is GPT-2's stand-in for a space.
  GgufBuilder b;
  b.add("tokenizer.ggml.model", GgufValue::of_string("gpt2"));
  b.add("tokenizer.ggml.tokens",
        GgufValue::of_array(GgufArray::of_strings({"h", "i", "\xC4\xA0", "hi", "\xC4\xA0hi",
                                                   "<|end|>"})));
  const std::vector<int32_t> types = {1, 1, 1, 1, 1, 3};
  b.add("tokenizer.ggml.token_type", GgufValue::of_array(GgufArray::of_int32(types)));
  b.add("tokenizer.ggml.merges",
        GgufValue::of_array(GgufArray::of_strings({"h i", "\xC4\xA0 hi"})));
  b.add("tokenizer.ggml.eos_token_id", GgufValue::of_uint32(5));
  b.add("tokenizer.ggml.eot_token_id", GgufValue::of_uint32(4));
  b.add("tokenizer.chat_template", GgufValue::of_string("{% for m in messages %}{% endfor %}"));
  auto bytes = b.to_bytes();
  ASSERT_TRUE(bytes);
  auto file = parse_gguf(*bytes, "bpe.gguf");
  ASSERT_TRUE(file);
  auto tok = tokenizer_from_gguf(*file);
  ASSERT_TRUE(tok) << tok.error().message;
  EXPECT_EQ(tok->model, "gpt2");
  ASSERT_NE(tok->tokenizer, nullptr);
  EXPECT_EQ(tok->eos_ids, (std::vector<int32_t>{5, 4}));
  EXPECT_EQ(tok->chat_template, "{% for m in messages %}{% endfor %}");
  EXPECT_FALSE(tok->vocabulary->add_bos);  // gpt2 default
  EXPECT_EQ(tok->vocabulary->merges.size(), 2u);
  EXPECT_EQ(tok->tokenizer->encode("hi hi", false), (std::vector<int32_t>{3, 4}));
  EXPECT_EQ(tok->tokenizer->decode(std::vector<int32_t>{3, 4}), "hi hi");
}

TEST(GgufTokenizer, NoVocabulary) {
  GgufBuilder b;
  b.add("tokenizer.ggml.model", GgufValue::of_string("no_vocab"));
  b.add("tokenizer.ggml.eos_token_id", GgufValue::of_uint32(7));
  auto bytes = b.to_bytes();
  auto file = parse_gguf(*bytes, "none.gguf");
  ASSERT_TRUE(file);
  auto tok = tokenizer_from_gguf(*file);
  ASSERT_TRUE(tok);
  EXPECT_EQ(tok->tokenizer, nullptr);
  EXPECT_FALSE(tok->vocabulary);
  EXPECT_EQ(tok->eos_ids, std::vector<int32_t>{7});
}

}  // namespace
}  // namespace conveyor
