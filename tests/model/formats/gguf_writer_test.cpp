#include "model/formats/gguf_writer.hpp"

#include <gtest/gtest.h>

#include <filesystem>

#include "model/formats/dummy.hpp"
#include "model/formats/gguf_llama.hpp"
#include "model/formats/tensor_convert.hpp"
#include "tests/model/formats/formats_test_util.hpp"

namespace conveyor {
namespace {

using test::small_model;

LoadedModel round_trip(const LoadedModel& m, GgufWriteOptions options = {}) {
  auto bytes = serialize_gguf(m, options);
  EXPECT_TRUE(bytes) << bytes.error().message;
  if (!bytes) return {};
  auto file = parse_gguf(*bytes, "roundtrip.gguf");
  EXPECT_TRUE(file) << file.error().message;
  if (!file) return {};
  auto back = llama_from_gguf(*file, /*dequantize=*/true);
  EXPECT_TRUE(back) << back.error().message;
  return back ? std::move(back).value() : LoadedModel{};
}

void expect_same_config(const ModelConfig& a, const ModelConfig& b) {
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.dim, b.dim);
  EXPECT_EQ(a.hidden_dim, b.hidden_dim);
  EXPECT_EQ(a.n_layers, b.n_layers);
  EXPECT_EQ(a.n_heads, b.n_heads);
  EXPECT_EQ(a.n_kv_heads, b.n_kv_heads);
  EXPECT_EQ(a.vocab_size, b.vocab_size);
  EXPECT_EQ(a.context_length, b.context_length);
  EXPECT_EQ(a.rotary_dim(), b.rotary_dim());
  EXPECT_EQ(a.rope_theta, b.rope_theta);
  EXPECT_EQ(a.rope_layout, b.rope_layout);
  EXPECT_EQ(a.rms_eps, b.rms_eps);
  EXPECT_EQ(a.tied_embeddings, b.tied_embeddings);
}

void expect_same_weights(const ModelWeights& a, const ModelWeights& b) {
  EXPECT_EQ(a.token_embedding.values, b.token_embedding.values);
  EXPECT_EQ(a.final_norm, b.final_norm);
  EXPECT_EQ(a.classifier.values, b.classifier.values);
  ASSERT_EQ(a.layers.size(), b.layers.size());
  for (size_t i = 0; i < a.layers.size(); ++i) {
    const LayerWeights &x = a.layers[i], &y = b.layers[i];
    EXPECT_EQ(x.attn_norm, y.attn_norm) << i;
    EXPECT_EQ(x.wq.values, y.wq.values) << i;
    EXPECT_EQ(x.wk.values, y.wk.values) << i;
    EXPECT_EQ(x.wv.values, y.wv.values) << i;
    EXPECT_EQ(x.wo.values, y.wo.values) << i;
    EXPECT_EQ(x.ffn_norm, y.ffn_norm) << i;
    EXPECT_EQ(x.w1.values, y.w1.values) << i;
    EXPECT_EQ(x.w2.values, y.w2.values) << i;
    EXPECT_EQ(x.w3.values, y.w3.values) << i;
  }
}

std::vector<float> through(GgmlType type, const std::vector<float>& x) {
  std::vector<uint8_t> enc(encoded_size(type, x.size()));
  std::vector<float> out(x.size());
  EXPECT_TRUE(encode_from_f32(type, x, enc));
  EXPECT_TRUE(decode_to_f32(type, enc, out));
  return out;
}

TEST(GgufWriter, F32RoundTripIsExact) {
  for (bool tied : {false, true}) {
    const LoadedModel m = small_model(tied);
    const LoadedModel back = round_trip(m);
    expect_same_config(m.config, back.config);
    expect_same_weights(m.weights, back.weights);
    EXPECT_EQ(back.eos_ids, m.eos_ids);
    EXPECT_EQ(back.chat_template, m.chat_template);
    ASSERT_TRUE(back.vocabulary);
    EXPECT_EQ(back.vocabulary->pieces, m.vocabulary->pieces);
    EXPECT_EQ(back.vocabulary->scores, m.vocabulary->scores);
    EXPECT_EQ(back.vocabulary->types, m.vocabulary->types);
    EXPECT_EQ(back.vocabulary->bos_id, 1);
    EXPECT_EQ(back.vocabulary->eos_id, 2);
    EXPECT_EQ(back.vocabulary->unk_id, 0);
    EXPECT_EQ(back.vocabulary->add_bos, m.vocabulary->add_bos);
    EXPECT_EQ(back.vocabulary->add_space_prefix, m.vocabulary->add_space_prefix);
    ASSERT_NE(back.tokenizer, nullptr);
    EXPECT_EQ(back.tokenizer->vocab_size(), m.config.vocab_size);
  }
}

TEST(GgufWriter, ReducedPrecisionMatchesTheEncoding) {
  const LoadedModel m = small_model(false);
  for (GgmlType type : {GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0}) {
    SCOPED_TRACE(ggml_type_description(uint32_t(type)));
    GgufWriteOptions options;
    options.tensor_type = type;
    const LoadedModel back = round_trip(m, options);
    expect_same_config(m.config, back.config);
    EXPECT_EQ(back.weights.token_embedding.values, through(type, m.weights.token_embedding.values));
    EXPECT_EQ(back.weights.classifier.values, through(type, m.weights.classifier.values));
    EXPECT_EQ(back.weights.layers[1].w2.values, through(type, m.weights.layers[1].w2.values));
    EXPECT_EQ(back.weights.layers[0].wk.values, through(type, m.weights.layers[0].wk.values));
    // Norms stay F32.
    EXPECT_EQ(back.weights.final_norm, m.weights.final_norm);
    EXPECT_EQ(back.weights.layers[0].attn_norm, m.weights.layers[0].attn_norm);
  }
}

TEST(GgufWriter, Q8_0FallsBackToF16ForShortRows) {
  LoadedModel m = small_model(false);
  m.config.dim = 48;  // rows of 48 are not a multiple of the Q8_0 block
  m.config.n_heads = 4;
  m.weights = make_random_weights(m.config, 5);
  GgufWriteOptions options;
  options.tensor_type = GgmlType::Q8_0;
  auto bytes = serialize_gguf(m, options);
  ASSERT_TRUE(bytes) << bytes.error().message;
  auto file = parse_gguf(*bytes, "short.gguf");
  ASSERT_TRUE(file);
  EXPECT_EQ(file->find_tensor("token_embd.weight")->type, uint32_t(GgmlType::F16));
  // ffn_down's rows have hidden_dim = 96 elements: those can be Q8_0.
  EXPECT_EQ(file->find_tensor("blk.0.ffn_down.weight")->type, uint32_t(GgmlType::Q8_0));
  EXPECT_EQ(file->find_tensor("output_norm.weight")->type, uint32_t(GgmlType::F32));
  auto back = llama_from_gguf(*file, /*dequantize=*/true);
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(back->weights.token_embedding.values, through(GgmlType::F16, m.weights.token_embedding.values));
}

TEST(GgufWriter, HalfSplitModelsArePermutedToAdjacentPairs) {
  LoadedModel m = small_model(false);
  m.config.rope_layout = RopeLayout::half_split;
  const LoadedModel back = round_trip(m);
  EXPECT_EQ(back.config.rope_layout, RopeLayout::adjacent_pairs);
  const int32_t hd = m.config.head_dim(), dim = m.config.dim;
  auto row = [&](const std::vector<float>& w, int32_t r) {
    return std::vector<float>(w.begin() + size_t(r) * dim, w.begin() + size_t(r + 1) * dim);
  };
  const LayerWeights &src = m.weights.layers[1], &dst = back.weights.layers[1];
  for (int32_t h = 0; h < m.config.n_heads; ++h)
    for (int32_t i = 0; i < hd / 2; ++i) {
      // The pair rotated together, (i, i + hd/2), becomes rows (2i, 2i + 1).
      EXPECT_EQ(row(dst.wq.values, h * hd + 2 * i), row(src.wq.values, h * hd + i));
      EXPECT_EQ(row(dst.wq.values, h * hd + 2 * i + 1), row(src.wq.values, h * hd + i + hd / 2));
    }
  for (int32_t h = 0; h < m.config.n_kv_heads; ++h)
    EXPECT_EQ(row(dst.wk.values, h * hd + 1), row(src.wk.values, h * hd + hd / 2));
  EXPECT_EQ(dst.wv.values, src.wv.values);
  EXPECT_EQ(dst.wo.values, src.wo.values);
}

TEST(GgufWriter, WritesAFileThatLoadModelReads) {
  test::TempDir dir;
  const std::string path = dir.file("small.gguf");
  const LoadedModel m = small_model(true);
  ASSERT_TRUE(write_gguf(m, path));
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  auto back = load_model(path);
  ASSERT_TRUE(back) << back.error().message;
  expect_same_config(m.config, back->config);
  expect_same_weights(m.weights, back->weights);
  // The keys llama.cpp needs to load a llama model are there.
  auto file = read_gguf(path);
  ASSERT_TRUE(file);
  for (const char* key :
       {"general.architecture", "general.alignment", "general.file_type", "llama.context_length",
        "llama.embedding_length", "llama.feed_forward_length", "llama.block_count",
        "llama.attention.head_count", "llama.attention.head_count_kv", "llama.rope.freq_base",
        "llama.rope.dimension_count", "llama.attention.layer_norm_rms_epsilon",
        "tokenizer.ggml.model", "tokenizer.ggml.tokens", "tokenizer.ggml.scores",
        "tokenizer.ggml.token_type", "tokenizer.ggml.bos_token_id",
        "tokenizer.ggml.eos_token_id"})
    EXPECT_NE(file->find(key), nullptr) << key;
  EXPECT_EQ(file->find("general.alignment")->type, GgufValueType::uint32);
  EXPECT_EQ(file->find("tokenizer.ggml.token_type")->as_array()->elem_type,
            GgufValueType::int32);
}

TEST(GgufWriter, ReportsErrors) {
  LoadedModel m = small_model(false);
  EXPECT_EQ(write_gguf(m, "/nonexistent-dir/x.gguf").error().code, Errc::io_error);
  EXPECT_NE(write_gguf(m, "/nonexistent-dir/x.gguf").error().message.find("/nonexistent-dir/x.gguf"),
            std::string::npos);
  m.weights.layers[1].w3.values.pop_back();
  EXPECT_EQ(serialize_gguf(m).error().code, Errc::invalid_argument);
  m = small_model(false);
  GgufWriteOptions bad;
  bad.tensor_type = GgmlType::Q4_K;
  EXPECT_EQ(serialize_gguf(m, bad).error().code, Errc::invalid_argument);
  bad.tensor_type = GgmlType::F32;
  bad.alignment = 24;
  EXPECT_EQ(serialize_gguf(m, bad).error().code, Errc::invalid_argument);
}

TEST(GgufWriter, ParsesTensorTypeNames) {
  EXPECT_EQ(*parse_gguf_tensor_type("f32"), GgmlType::F32);
  EXPECT_EQ(*parse_gguf_tensor_type("F16"), GgmlType::F16);
  EXPECT_EQ(*parse_gguf_tensor_type("bf16"), GgmlType::BF16);
  EXPECT_EQ(*parse_gguf_tensor_type("Q8_0"), GgmlType::Q8_0);
  auto bad = parse_gguf_tensor_type("q4_k");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("q4_k"), std::string::npos);
}

TEST(GgufWriter, ByteTokenizerModelsKeepTheirTokenization) {
  const LoadedModel m = embedded_default_model();
  const LoadedModel back = round_trip(m);
  expect_same_weights(m.weights, back.weights);
  EXPECT_EQ(back.eos_ids, std::vector<int32_t>{257});
  ASSERT_NE(back.tokenizer, nullptr);
  for (const std::string text : {"hello", " two  spaces", "h\xC3\xA9llo \xE2\x96\x81 \x01", ""}) {
    EXPECT_EQ(back.tokenizer->encode(text, true), m.tokenizer->encode(text, true)) << text;
    EXPECT_EQ(back.tokenizer->decode(m.tokenizer->encode(text, true)), text);
  }
}

TEST(GgufWriter, SharedModelReencodesToTheSharedQ8_0) {
  CONVEYOR_REQUIRE_MODEL(f32_path, "tiny-random-llama-f32.gguf");
  CONVEYOR_REQUIRE_MODEL(q8_path, "tiny-random-llama-q8_0.gguf");
  LoadOptions decoded;
  decoded.dequantize = true;
  auto f32 = load_model(f32_path, decoded);
  auto q8 = load_model(q8_path, decoded);
  ASSERT_TRUE(f32 && q8);
  expect_same_weights(f32->weights, round_trip(*f32).weights);
  GgufWriteOptions options;
  options.tensor_type = GgmlType::Q8_0;
  const LoadedModel ours = round_trip(*f32, options);
  expect_same_weights(q8->weights, ours.weights);  // bit for bit what llama.cpp wrote
  EXPECT_EQ(ours.vocabulary->pieces, q8->vocabulary->pieces);
  EXPECT_EQ(ours.vocabulary->scores, q8->vocabulary->scores);
  EXPECT_EQ(ours.vocabulary->types, q8->vocabulary->types);
}

}  // namespace
}  // namespace conveyor
