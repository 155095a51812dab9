#include "model/formats/gguf_writer.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>

#include "model/formats/dummy.hpp"
#include "model/formats/gguf_llama.hpp"
#include "model/formats/tensor_convert.hpp"
#include "tests/model/formats/formats_test_util.hpp"

namespace conveyor {
namespace {

using test::rms_relative_error;
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
  for (auto [file_type, type] : {std::pair{GgufFileType::f16, GgmlType::F16},
                                 std::pair{GgufFileType::bf16, GgmlType::BF16},
                                 std::pair{GgufFileType::q8_0, GgmlType::Q8_0}}) {
    SCOPED_TRACE(ggml_type_description(uint32_t(type)));
    GgufWriteOptions options;
    options.file_type = file_type;
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
  options.file_type = GgufFileType::q8_0;
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

// A stop asked (convert's handler of SIGINT and SIGTERM sets the flag)
// ends the write: the target stays as it was, and no temporary file stays.
TEST(GgufWriter, AStopLeavesTheTargetAndNoTemporaryFile) {
  test::TempDir dir;
  const std::string path = dir.file("small.gguf");
  const LoadedModel m = small_model(true);
  std::atomic<bool> stop{true};
  GgufWriteOptions options;
  options.stop = &stop;
  Status s = write_gguf(m, path, options);
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().code, Errc::io_error);
  EXPECT_NE(s.error().message.find("interrupted; nothing was written"), std::string::npos) << s.error().message;
  EXPECT_TRUE(std::filesystem::is_empty(dir.file(""))) << "a temporary file stayed";
  // Over an existing file: the file stays whole.
  ASSERT_TRUE(write_gguf(m, path));
  const auto size = std::filesystem::file_size(path);
  s = write_gguf(m, path, options);
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message.find("the file was left as it was"), std::string::npos) << s.error().message;
  EXPECT_EQ(std::filesystem::file_size(path), size);
  EXPECT_TRUE(load_model(path));
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.file("")), std::filesystem::directory_iterator()), 1);
  stop = false;
  EXPECT_TRUE(write_gguf(m, path, options));
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
  bad.file_type = GgufFileType(3);  // llama.cpp's Q4_1, which conveyor does not write
  EXPECT_EQ(serialize_gguf(m, bad).error().code, Errc::invalid_argument);
  bad.file_type = GgufFileType::all_f32;
  bad.alignment = 24;
  EXPECT_EQ(serialize_gguf(m, bad).error().code, Errc::invalid_argument);
}

// A model loaded as its file encodes it (no LoadOptions::dequantize) is
// refused with a reason, rather than written with empty tensor data.
TEST(GgufWriter, RefusesMatricesHeldEncoded) {
  CONVEYOR_REQUIRE_MODEL(q8_path, "tiny-random-llama-q8_0.gguf");
  auto encoded = load_model(q8_path);
  ASSERT_TRUE(encoded) << encoded.error().message;
  const auto bytes = serialize_gguf(*encoded);
  ASSERT_FALSE(bytes);
  EXPECT_EQ(bytes.error().code, Errc::invalid_argument);
  EXPECT_NE(bytes.error().message.find("dequantize"), std::string::npos) << bytes.error().message;
  const std::string path = ::testing::TempDir() + "gguf_writer_encoded.gguf";
  EXPECT_EQ(write_gguf(*encoded, path).error().code, Errc::invalid_argument);
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(GgufWriter, ParsesFileTypeNames) {
  EXPECT_EQ(*parse_gguf_file_type("f32"), GgufFileType::all_f32);
  EXPECT_EQ(*parse_gguf_file_type("F16"), GgufFileType::f16);
  EXPECT_EQ(*parse_gguf_file_type("bf16"), GgufFileType::bf16);
  EXPECT_EQ(*parse_gguf_file_type("Q8_0"), GgufFileType::q8_0);
  EXPECT_EQ(*parse_gguf_file_type("q4_0"), GgufFileType::q4_0);
  EXPECT_EQ(*parse_gguf_file_type("Q4_K_M"), GgufFileType::q4_k_m);
  EXPECT_EQ(*parse_gguf_file_type("q5_k_m"), GgufFileType::q5_k_m);
  EXPECT_EQ(*parse_gguf_file_type("q6_k"), GgufFileType::q6_k);
  // llama.cpp's numbers (llama_ftype), as general.file_type stores them.
  EXPECT_EQ(uint32_t(GgufFileType::q4_0), 2u);
  EXPECT_EQ(uint32_t(GgufFileType::q8_0), 7u);
  EXPECT_EQ(uint32_t(GgufFileType::q4_k_m), 15u);
  EXPECT_EQ(uint32_t(GgufFileType::q5_k_m), 17u);
  EXPECT_EQ(uint32_t(GgufFileType::q6_k), 18u);
  EXPECT_EQ(uint32_t(GgufFileType::bf16), 32u);
  for (const char* name : {"f32", "f16", "bf16", "q8_0", "q4_0", "q4_k_m", "q5_k_m", "q6_k"})
    EXPECT_EQ(gguf_file_type_name(*parse_gguf_file_type(name)), name);
  EXPECT_EQ(gguf_file_type_name(GgufFileType(3)), "");
  for (const char* name : {"q4_k", "q4_k_s", "q5_0", ""}) {
    auto bad = parse_gguf_file_type(name);
    ASSERT_FALSE(bad) << name;
    EXPECT_NE(bad.error().message.find("'" + std::string(name) + "'"), std::string::npos);
  }
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
  options.file_type = GgufFileType::q8_0;
  const LoadedModel ours = round_trip(*f32, options);
  expect_same_weights(q8->weights, ours.weights);  // bit for bit what llama.cpp wrote
  EXPECT_EQ(ours.vocabulary->pieces, q8->vocabulary->pieces);
  EXPECT_EQ(ours.vocabulary->scores, q8->vocabulary->scores);
  EXPECT_EQ(ours.vocabulary->types, q8->vocabulary->types);
}

// A model whose rows (256) fit the K-quants, with 8 layers so that the _m
// mixes vary by layer.
LoadedModel k_quant_model() {
  LoadedModel m = small_model(false);
  m.config.dim = 256;
  m.config.hidden_dim = 256;
  m.config.n_layers = 8;
  m.config.n_heads = 4;
  m.config.n_kv_heads = 2;
  m.weights = make_random_weights(m.config, 11);
  return m;
}

GgmlType stored_type(const GgufFile& f, const std::string& name) {
  const GgufTensorInfo* t = f.find_tensor(name);
  EXPECT_NE(t, nullptr) << name;
  return t ? GgmlType(t->type) : GgmlType::I8;
}

TEST(GgufWriter, WritesEveryFileTypeAndReadsItBack) {
  const LoadedModel m = k_quant_model();
  const ModelConfig& c = m.config;
  for (const char* name : {"f32", "f16", "bf16", "q8_0", "q4_0", "q4_k_m", "q5_k_m", "q6_k"}) {
    SCOPED_TRACE(name);
    GgufWriteOptions options;
    options.file_type = *parse_gguf_file_type(name);
    auto bytes = serialize_gguf(m, options);
    ASSERT_TRUE(bytes) << bytes.error().message;
    auto file = parse_gguf(*bytes, std::string(name) + ".gguf");
    ASSERT_TRUE(file) << file.error().message;
    EXPECT_EQ(file->find("general.file_type")->as_int(), int64_t(options.file_type));
    EXPECT_EQ(file->find("general.quantization_version")->as_int(), 2);
    for (const GgufTensorInfo& t : file->tensors) {
      const GgmlType expected = t.dims.size() == 1 ? GgmlType::F32
                                                   : gguf_matrix_type(options.file_type, c,
                                                                      t.name, t.dims[0]);
      EXPECT_EQ(ggml_type_description(t.type), ggml_type_description(uint32_t(expected))) << t.name;
      // Every tensor decodes through the reader.
      EXPECT_TRUE(tensor_to_f32(*file, t)) << t.name;
    }

    // The loader keeps each matrix in its type for the forward pass...
    auto kept = llama_from_gguf(*file);
    ASSERT_TRUE(kept) << kept.error().message;
    EXPECT_EQ(uint32_t(kept->weights.layers[7].wv.type),
              uint32_t(stored_type(*file, "blk.7.attn_v.weight")));
    EXPECT_EQ(uint32_t(kept->weights.classifier.type), uint32_t(stored_type(*file, "output.weight")));
    // ...and decodes it to exactly what the encoders' round trip gives.
    auto back = llama_from_gguf(*file, /*dequantize=*/true);
    ASSERT_TRUE(back) << back.error().message;
    auto check = [&](const std::string& tensor, const std::vector<float>& original,
                     const std::vector<float>& loaded) {
      const GgmlType type = stored_type(*file, tensor);
      EXPECT_EQ(loaded, through(type, original)) << tensor;
      const double bound = type == GgmlType::Q4_0   ? 0.095
                           : type == GgmlType::Q4_K ? 0.078
                           : type == GgmlType::Q5_K ? 0.039
                           : type == GgmlType::Q6_K ? 0.020
                           : type == GgmlType::Q8_0 ? 0.005
                                                    : 0.004;  // F16, BF16, F32
      EXPECT_LT(rms_relative_error(original, loaded), bound) << tensor;
    };
    check("token_embd.weight", m.weights.token_embedding.values, back->weights.token_embedding.values);
    check("output.weight", m.weights.classifier.values, back->weights.classifier.values);
    for (int32_t i : {0, 1, 3, 7}) {
      const std::string p = "blk." + std::to_string(i) + ".";
      const LayerWeights &src = m.weights.layers[size_t(i)], &dst = back->weights.layers[size_t(i)];
      check(p + "attn_v.weight", src.wv.values, dst.wv.values);
      check(p + "attn_output.weight", src.wo.values, dst.wo.values);
      check(p + "ffn_down.weight", src.w2.values, dst.w2.values);
      check(p + "ffn_up.weight", src.w3.values, dst.w3.values);
      EXPECT_EQ(dst.ffn_norm, src.ffn_norm);
    }
  }
}

TEST(GgufWriter, MixesTensorTypesAsLlamaCpp) {
  const LoadedModel m = k_quant_model();
  // 8 layers: llama.cpp's use_more_bits picks layers 0 and 7 (the first and
  // last eighth) and 3 and 6 (every third in between).
  const std::set<int32_t> more_bits = {0, 3, 6, 7};
  for (auto [file_type, base] : {std::pair{GgufFileType::q4_k_m, GgmlType::Q4_K},
                                 std::pair{GgufFileType::q5_k_m, GgmlType::Q5_K},
                                 std::pair{GgufFileType::q4_0, GgmlType::Q4_0},
                                 std::pair{GgufFileType::q6_k, GgmlType::Q6_K}}) {
    SCOPED_TRACE(gguf_file_type_name(file_type));
    GgufWriteOptions options;
    options.file_type = file_type;
    auto bytes = serialize_gguf(m, options);
    ASSERT_TRUE(bytes) << bytes.error().message;
    auto file = parse_gguf(*bytes, "mix.gguf");
    ASSERT_TRUE(file);
    const bool k_m = file_type == GgufFileType::q4_k_m || file_type == GgufFileType::q5_k_m;
    EXPECT_EQ(stored_type(*file, "output.weight"), GgmlType::Q6_K);
    EXPECT_EQ(stored_type(*file, "token_embd.weight"), base);
    EXPECT_EQ(stored_type(*file, "output_norm.weight"), GgmlType::F32);
    for (int32_t i = 0; i < 8; ++i) {
      const std::string p = "blk." + std::to_string(i) + ".";
      const GgmlType more = k_m && more_bits.contains(i) ? GgmlType::Q6_K : base;
      EXPECT_EQ(stored_type(*file, p + "attn_v.weight"), more) << i;
      EXPECT_EQ(stored_type(*file, p + "ffn_down.weight"), more) << i;
      for (const char* other : {"attn_q", "attn_k", "attn_output", "ffn_gate", "ffn_up"})
        EXPECT_EQ(stored_type(*file, p + other + ".weight"), base) << i << " " << other;
      EXPECT_EQ(stored_type(*file, p + "attn_norm.weight"), GgmlType::F32);
    }
  }
  // Tied embeddings: the embedding is the classifier, so it gets Q6_K.
  LoadedModel tied = k_quant_model();
  tied.config.tied_embeddings = true;
  tied.weights.classifier = {};
  GgufWriteOptions options;
  options.file_type = GgufFileType::q4_k_m;
  auto bytes = serialize_gguf(tied, options);
  ASSERT_TRUE(bytes) << bytes.error().message;
  auto file = parse_gguf(*bytes, "tied.gguf");
  ASSERT_TRUE(file);
  EXPECT_EQ(stored_type(*file, "token_embd.weight"), GgmlType::Q6_K);
  EXPECT_EQ(file->find_tensor("output.weight"), nullptr);
}

TEST(GgufWriter, MixesFollowTheLayerCount) {
  ModelConfig c = k_quant_model().config;
  auto type = [&](GgufFileType ft, const std::string& name) {
    return gguf_matrix_type(ft, c, name, 4096);
  };
  // 32 layers (a 7B/8B shape): Q6_K on layers 0-3 and 28-31, and on every
  // third from 6 to 27.
  c.n_layers = 32;
  std::set<int32_t> q6;
  for (int32_t i = 0; i < 32; ++i)
    if (type(GgufFileType::q4_k_m, "blk." + std::to_string(i) + ".attn_v.weight") == GgmlType::Q6_K)
      q6.insert(i);
  EXPECT_EQ(q6, (std::set<int32_t>{0, 1, 2, 3, 6, 9, 12, 15, 18, 21, 24, 27, 28, 29, 30, 31}));
  EXPECT_EQ(type(GgufFileType::q5_k_m, "blk.9.ffn_down.weight"), GgmlType::Q6_K);
  EXPECT_EQ(type(GgufFileType::q5_k_m, "blk.10.ffn_down.weight"), GgmlType::Q5_K);
  EXPECT_EQ(type(GgufFileType::q4_0, "blk.0.attn_v.weight"), GgmlType::Q4_0);
  // 80 layers with grouped-query attention (llama.cpp's 70B): attn_v never
  // below Q5_K in Q4_K_M.
  c.n_layers = 80;
  c.n_heads = 64;
  c.n_kv_heads = 8;
  EXPECT_EQ(type(GgufFileType::q4_k_m, "blk.40.attn_v.weight"), GgmlType::Q5_K);
  EXPECT_EQ(type(GgufFileType::q4_k_m, "blk.42.attn_v.weight"), GgmlType::Q6_K);  // (42 - 10) % 3 == 2
  EXPECT_EQ(type(GgufFileType::q4_k_m, "blk.40.attn_q.weight"), GgmlType::Q4_K);
  c.n_kv_heads = 64;  // 80 layers without GQA (65B): no such rule
  EXPECT_EQ(type(GgufFileType::q4_k_m, "blk.40.attn_v.weight"), GgmlType::Q4_K);
  // Not llama.cpp's file types: F16 and BF16 files store every matrix so.
  EXPECT_EQ(type(GgufFileType::bf16, "output.weight"), GgmlType::BF16);
  EXPECT_EQ(type(GgufFileType::f16, "blk.0.attn_v.weight"), GgmlType::F16);
  EXPECT_EQ(type(GgufFileType::all_f32, "token_embd.weight"), GgmlType::F32);
}

TEST(GgufWriter, RowsThatDoNotFitFallBack) {
  // Rows of 64 and 96 values fit neither the K-quants (256) nor, for 48, Q4_0 (32).
  const LoadedModel m = small_model(false);  // dim 64, hidden 96
  auto types = [](const LoadedModel& model, GgufFileType ft) {
    GgufWriteOptions options;
    options.file_type = ft;
    auto bytes = serialize_gguf(model, options);
    EXPECT_TRUE(bytes) << bytes.error().message;
    std::map<std::string, GgmlType> out;
    if (!bytes) return out;
    auto file = parse_gguf(*bytes, "fallback.gguf");
    EXPECT_TRUE(file);
    if (!file) return out;
    for (const GgufTensorInfo& t : file->tensors) out[t.name] = GgmlType(t.type);
    return out;
  };
  for (GgufFileType ft : {GgufFileType::q4_k_m, GgufFileType::q5_k_m, GgufFileType::q6_k}) {
    SCOPED_TRACE(gguf_file_type_name(ft));
    for (const auto& [name, type] : types(m, ft))
      EXPECT_EQ(type, name.ends_with("norm.weight") ? GgmlType::F32 : GgmlType::Q8_0) << name;
  }
  // Q4_0: rows of 64 and 96 fit; the classifier gets Q8_0 (Q6_K does not fit).
  auto q4 = types(m, GgufFileType::q4_0);
  EXPECT_EQ(q4["output.weight"], GgmlType::Q8_0);
  EXPECT_EQ(q4["token_embd.weight"], GgmlType::Q4_0);
  EXPECT_EQ(q4["blk.1.ffn_down.weight"], GgmlType::Q4_0);
  LoadedModel narrow = small_model(false);
  narrow.config.dim = 48;
  narrow.config.n_heads = 4;
  narrow.weights = make_random_weights(narrow.config, 5);
  auto q4n = types(narrow, GgufFileType::q4_0);
  EXPECT_EQ(q4n["token_embd.weight"], GgmlType::F16);
  EXPECT_EQ(q4n["output.weight"], GgmlType::F16);
  EXPECT_EQ(q4n["blk.0.attn_q.weight"], GgmlType::F16);
  EXPECT_EQ(q4n["blk.0.ffn_down.weight"], GgmlType::Q4_0);  // rows of hidden_dim = 96
}

// The shared files were quantized by llama.cpp's llama-quantize: the recipe
// gives every matrix the type llama.cpp gave it, and a model of the same
// shape written here gets the same types tensor by tensor.
TEST(GgufWriter, RecipesChooseTheTypesLlamaCppChose) {
  struct Case {
    const char* file;
    GgufFileType type;
    const char* arch;
  };
  for (const Case& k : {Case{"tiny-llama2-q4_0.gguf", GgufFileType::q4_0, "llama"},
                        Case{"tiny-llama2-q4_k_m.gguf", GgufFileType::q4_k_m, "llama"},
                        Case{"tiny-llama2-q5_k_m.gguf", GgufFileType::q5_k_m, "llama"},
                        Case{"tiny-llama2-q8_0.gguf", GgufFileType::q8_0, "llama"},
                        Case{"tiny-llama3-q4_k_m.gguf", GgufFileType::q4_k_m, "llama"},
                        Case{"tiny-qwen2-q4_k_m.gguf", GgufFileType::q4_k_m, "qwen2"}}) {
    CONVEYOR_REQUIRE_MODEL(path, k.file);
    SCOPED_TRACE(k.file);
    auto file = read_gguf(path);
    ASSERT_TRUE(file) << file.error().message;
    EXPECT_EQ(file->find("general.file_type")->as_int(), int64_t(k.type));
    const std::string arch = k.arch;
    ModelConfig c;
    c.n_layers = int32_t(*file->find(arch + ".block_count")->as_int());
    c.n_heads = int32_t(*file->find(arch + ".attention.head_count")->as_int());
    c.n_kv_heads = int32_t(*file->find(arch + ".attention.head_count_kv")->as_int());
    c.dim = int32_t(*file->find(arch + ".embedding_length")->as_int());
    c.hidden_dim = int32_t(*file->find(arch + ".feed_forward_length")->as_int());
    c.tied_embeddings = file->find_tensor("output.weight") == nullptr;
    size_t matrices = 0;
    for (const GgufTensorInfo& t : file->tensors) {
      if (t.dims.size() < 2) continue;  // norms, biases, rope_freqs: F32
      EXPECT_EQ(ggml_type_description(uint32_t(gguf_matrix_type(k.type, c, t.name, t.dims[0]))),
                ggml_type_description(t.type))
          << t.name;
      ++matrices;
    }
    EXPECT_EQ(matrices, size_t(7 * c.n_layers + (c.tied_embeddings ? 1 : 2)));
    if (arch != "llama") continue;
    // Written here from random weights of that shape (a smaller vocabulary).
    LoadedModel m = small_model(c.tied_embeddings);
    m.config.dim = c.dim;
    m.config.hidden_dim = c.hidden_dim;
    m.config.n_layers = c.n_layers;
    m.config.n_heads = c.n_heads;
    m.config.n_kv_heads = c.n_kv_heads;
    m.weights = make_random_weights(m.config, 3);
    GgufWriteOptions options;
    options.file_type = k.type;
    auto bytes = serialize_gguf(m, options);
    ASSERT_TRUE(bytes) << bytes.error().message;
    auto ours = parse_gguf(*bytes, "ours.gguf");
    ASSERT_TRUE(ours);
    EXPECT_EQ(ours->tensors.size(), file->tensors.size() - (file->find_tensor("rope_freqs.weight") ? 1 : 0));
    for (const GgufTensorInfo& t : ours->tensors) {
      const GgufTensorInfo* theirs = file->find_tensor(t.name);
      ASSERT_NE(theirs, nullptr) << t.name;
      EXPECT_EQ(ggml_type_description(t.type), ggml_type_description(theirs->type)) << t.name;
    }
  }
}

}  // namespace
}  // namespace conveyor
