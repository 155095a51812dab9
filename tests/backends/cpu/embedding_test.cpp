// Embeddings (backends/cpu/cpu_embedder.hpp) against llama.cpp's own
// llama-embedding on the same GGUF files (data/README.md says how the
// vectors were made), and the properties the server relies on: batching
// does not change a vector, and embedding beside the engine's forward pass
// changes neither.
#include <gtest/gtest.h>

#include <simdjson.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <thread>

#include "backends/cpu/cpu_embedder.hpp"
#include "model/formats/loader.hpp"
#include "tests/shared_models.hpp"

namespace conveyor {
namespace {

std::string shared_model(const std::string& name) { return test::shared_model_path(name); }

struct Case {
  Pooling pooling = Pooling::last;
  std::string text;
  std::vector<int32_t> tokens;  // as llama.cpp tokenized text
  std::vector<float> embedding;
};

std::vector<Case> read_cases(const std::string& name) {
  std::ifstream in(std::filesystem::path(CONVEYOR_EMBEDDING_DATA) / name);
  std::vector<Case> out;
  simdjson::dom::parser parser;
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    simdjson::dom::element doc = parser.parse(line);
    Case c;
    c.pooling = *parse_pooling(std::string_view(doc["pooling"]));
    c.text = std::string(std::string_view(doc["text"]));
    for (int64_t t : doc["tokens"].get_array()) c.tokens.push_back(int32_t(t));
    for (double v : doc["embedding"].get_array()) c.embedding.push_back(float(v));
    out.push_back(std::move(c));
  }
  return out;
}

double cosine(const std::vector<float>& a, const std::vector<float>& b) {
  double ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < a.size(); ++i) ab += double(a[i]) * b[i], aa += double(a[i]) * a[i], bb += double(b[i]) * b[i];
  return ab / std::sqrt(aa * bb);
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, double(std::fabs(a[i] - b[i])));
  return d;
}

struct Loaded {
  std::shared_ptr<Transformer> transformer;
  std::shared_ptr<const Tokenizer> tokenizer;
};

Loaded load(const std::string& name) {
  auto model = load_model(shared_model(name));
  EXPECT_TRUE(model) << model.error().message;
  if (!model) return {};
  Loaded l;
  l.tokenizer = model->tokenizer;
  l.transformer = std::make_shared<Transformer>(model->config, std::move(model->weights), 2);
  return l;
}

// Tokenizes each case's text as the server does and checks that llama.cpp
// made the same ids; then embeds all of one pooling's inputs in one call (one
// batch) and compares each vector with llama.cpp's.
void compare_with_llama_cpp(const std::string& model, const std::string& data, double min_cosine,
                            double max_diff) {
  if (!std::filesystem::exists(shared_model(model)))
    GTEST_SKIP() << shared_model(model) << " not found (see ../shared/models/README.md)";
  const std::vector<Case> cases = read_cases(data);
  ASSERT_EQ(cases.size(), 6u) << data;
  Loaded l = load(model);
  ASSERT_TRUE(l.transformer && l.tokenizer);
  // f32 KV, as llama.cpp ran (-ctk f32 -ctv f32).
  CpuEmbedder embedder(l.transformer, KvDtype::f32);
  for (Pooling pooling : {Pooling::last, Pooling::mean}) {
    std::vector<std::vector<int32_t>> inputs;
    std::vector<const Case*> expected;
    for (const Case& c : cases) {
      if (c.pooling != pooling) continue;
      const auto ids = l.tokenizer->encode(c.text, EncodeOptions{.add_bos = true, .parse_special = true});
      EXPECT_EQ(ids, c.tokens) << c.text;
      inputs.push_back(ids);
      expected.push_back(&c);
    }
    auto got = embedder.embed(inputs, pooling);
    ASSERT_TRUE(got) << got.error().message;
    for (size_t i = 0; i < inputs.size(); ++i) {
      const std::vector<float>& want = expected[i]->embedding;
      ASSERT_EQ((*got)[i].size(), want.size());
      const double cos = cosine((*got)[i], want), diff = max_abs_diff((*got)[i], want);
      EXPECT_GT(cos, min_cosine) << to_string(pooling) << " '" << expected[i]->text << "'";
      EXPECT_LT(diff, max_diff) << to_string(pooling) << " '" << expected[i]->text << "'";
      std::printf("%s %-4s %3zu tokens: cosine 1 - %.2e, max |diff| %.2e\n", model.c_str(), to_string(pooling),
                  inputs[i].size(), 1.0 - cos, diff);
    }
  }
}

// F32 weights: both sides compute in float32 and differ only in the order of
// their sums (ggml's kernels vs kernels/cpu) and llama.cpp printed 7 decimals
// (5e-8). Measured: 1 - cosine under 1e-13, largest difference 1.4e-7; the
// bounds leave 7x room on the difference and fail on any real error (a wrong
// pooling or norm moves components by 1e-2 and more).
TEST(Embeddings, MatchLlamaCppOnF32Weights) {
  compare_with_llama_cpp("tiny-random-llama-f32.gguf", "embeddings-tiny-random-llama-f32.jsonl", 1 - 1e-10, 1e-6);
}

// Q8_0 weights: both round the activations to int8 per block of 32 inside
// the products (kernels/cpu/quant_matmul.hpp, as llama.cpp does), but a value
// on a rounding boundary may round the other way, which moves a product by
// a block scale; two layers spread that. Measured: 1 - cosine up to 1.9e-4,
// largest difference 3.8e-3 (of components up to ~0.3); the bounds are 5x
// and 2.5x that.
TEST(Embeddings, MatchLlamaCppOnQ8_0Weights) {
  compare_with_llama_cpp("tiny-llama2-q8_0.gguf", "embeddings-tiny-llama2-q8_0.jsonl", 1 - 1e-3, 1e-2);
}

// An input's vector does not depend on what it was batched with.
TEST(Embeddings, BatchingChangesNothing) {
  if (!std::filesystem::exists(shared_model("tiny-random-llama-f32.gguf"))) GTEST_SKIP() << "model not found";
  Loaded l = load("tiny-random-llama-f32.gguf");
  ASSERT_TRUE(l.transformer);
  CpuEmbedder embedder(l.transformer, KvDtype::f32);
  const std::vector<std::vector<int32_t>> inputs = {{1, 15043, 3186}, {1, 450, 4996, 17354, 1701, 29916, 432},
                                                    std::vector<int32_t>(100, 278)};
  for (Pooling pooling : {Pooling::last, Pooling::mean}) {
    auto together = embedder.embed(inputs, pooling);
    ASSERT_TRUE(together);
    for (size_t i = 0; i < inputs.size(); ++i) {
      auto alone = embedder.embed({inputs[i]}, pooling);
      ASSERT_TRUE(alone);
      EXPECT_LT(max_abs_diff((*together)[i], (*alone)[0]), 1e-6) << i;
    }
  }
}

// The embedder reads the weights that the step runner's forward() reads, on
// another thread with its own scratch: running both at once gives each the
// answer it gets alone.
TEST(Embeddings, RunBesideTheForwardPass) {
  if (!std::filesystem::exists(shared_model("tiny-random-llama-f32.gguf"))) GTEST_SKIP() << "model not found";
  Loaded l = load("tiny-random-llama-f32.gguf");
  ASSERT_TRUE(l.transformer);
  CpuEmbedder embedder(l.transformer, KvDtype::f32);
  const std::vector<std::vector<int32_t>> inputs = {std::vector<int32_t>(64, 450), {1, 15043, 3186}};
  const auto want = embedder.embed(inputs, Pooling::mean);
  ASSERT_TRUE(want);

  const std::vector<int32_t> prompt(96, 17354);
  KvCache kv(KvCacheShape::for_model(l.transformer->config(), 16, 6));
  std::vector<int32_t> table(6);
  std::iota(table.begin(), table.end(), 0);
  ForwardBatch batch;
  batch.add_sequence(prompt, 0, table, true);
  std::vector<float> alone, beside;
  l.transformer->forward(batch, kv, alone);

  std::thread generator([&] {
    for (int i = 0; i < 20; ++i) l.transformer->forward(batch, kv, beside);
  });
  for (int i = 0; i < 20; ++i) {
    auto got = embedder.embed(inputs, Pooling::mean);
    ASSERT_TRUE(got);
    for (size_t j = 0; j < inputs.size(); ++j) EXPECT_EQ((*got)[j], (*want)[j]);
  }
  generator.join();
  EXPECT_EQ(beside, alone);
}

TEST(Embeddings, RefuseBadInputsByIndex) {
  if (!std::filesystem::exists(shared_model("tiny-random-llama-f32.gguf"))) GTEST_SKIP() << "model not found";
  Loaded l = load("tiny-random-llama-f32.gguf");
  ASSERT_TRUE(l.transformer);
  CpuEmbedder embedder(l.transformer, KvDtype::f32);
  const int32_t ctx = l.transformer->config().context_length;
  auto empty = embedder.embed({{1, 2}, {}}, Pooling::last);
  ASSERT_FALSE(empty);
  EXPECT_EQ(empty.error().message, "input 1 is empty");
  auto too_long = embedder.embed({std::vector<int32_t>(size_t(ctx) + 1, 5)}, Pooling::last);
  ASSERT_FALSE(too_long);
  EXPECT_NE(too_long.error().message.find("more than the model's context"), std::string::npos);
  auto bad_id = embedder.embed({{1, 32000}}, Pooling::last);
  ASSERT_FALSE(bad_id);
  EXPECT_NE(bad_id.error().message.find("token id 32000"), std::string::npos);
  // The whole context is allowed (an embedding generates nothing after it).
  EXPECT_TRUE(embedder.embed({std::vector<int32_t>(size_t(ctx), 5)}, Pooling::last));
}

TEST(Embeddings, PoolAndNormalize) {
  const float hidden[3 * 2] = {1, 0, 3, 0, 2, 4};  // [3 tokens, dim 2]
  float out[2];
  pool_and_normalize(hidden, 3, 2, Pooling::last, out);
  EXPECT_FLOAT_EQ(out[0], 0.44721360f);  // (2, 4) / sqrt(20)
  EXPECT_FLOAT_EQ(out[1], 0.89442719f);
  pool_and_normalize(hidden, 3, 2, Pooling::mean, out);
  EXPECT_FLOAT_EQ(out[0], 0.83205029f);  // (2, 4/3) / |(2, 4/3)|
  EXPECT_FLOAT_EQ(out[1], 0.55470020f);
  const float zeros[2] = {0, 0};
  pool_and_normalize(zeros, 1, 2, Pooling::mean, out);
  EXPECT_EQ(out[0], 0.0f);
  EXPECT_EQ(out[1], 0.0f);
}

}  // namespace
}  // namespace conveyor
