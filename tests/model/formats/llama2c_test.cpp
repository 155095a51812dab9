#include "model/formats/llama2c.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "tests/model/formats/formats_test_util.hpp"

namespace conveyor {
namespace {

// A llama2.c checkpoint written independently of the loader, from the format
// description: header, then each tensor for all layers, final norm, two RoPE
// tables, and the classifier when vocab_size is negative. Every float tells
// which tensor it belongs to: tensor k holds k + i / 1e6.
struct Checkpoint {
  int32_t dim, hidden, layers, heads, kv_heads, vocab, seq;
  bool shared;

  std::vector<uint8_t> bytes() const {
    std::vector<uint8_t> out;
    auto put_i32 = [&](int32_t v) {
      uint8_t b[4];
      std::memcpy(b, &v, 4);
      out.insert(out.end(), b, b + 4);
    };
    for (int32_t v : {dim, hidden, layers, heads, kv_heads, shared ? vocab : -vocab, seq}) put_i32(v);
    int tensor = 0;
    auto put_tensor = [&](size_t n) {
      for (size_t i = 0; i < n; ++i) {
        const float v = float(tensor) + float(i) * 1e-6f;
        uint8_t b[4];
        std::memcpy(b, &v, 4);
        out.insert(out.end(), b, b + 4);
      }
      ++tensor;
    };
    const size_t d = dim, h = hidden, kv = size_t(dim) / heads * kv_heads, head = size_t(dim) / heads;
    put_tensor(size_t(vocab) * d);                                // 0 token embedding
    for (size_t n : {d, d * d, kv * d, kv * d, d * d, d, h * d, d * h, h * d})
      for (int l = 0; l < layers; ++l) put_tensor(n);            // 1 .. 9 * layers
    put_tensor(d);                                                // final norm
    put_tensor(size_t(seq) * head / 2);                           // freq_cis_real
    put_tensor(size_t(seq) * head / 2);                           // freq_cis_imag
    if (!shared) put_tensor(size_t(vocab) * d);                   // classifier
    return out;
  }
};

float tag(const std::vector<float>& t, size_t i = 0) { return t.at(i) - float(i) * 1e-6f; }

TEST(Llama2c, ReadsAnUnsharedCheckpointWrittenByHand) {
  const Checkpoint ck{16, 40, 3, 4, 2, 50, 32, false};
  auto m = parse_llama2c(ck.bytes(), "hand.bin");
  ASSERT_TRUE(m) << m.error().message;
  const ModelConfig& c = m->config;
  EXPECT_EQ(c.dim, 16);
  EXPECT_EQ(c.hidden_dim, 40);
  EXPECT_EQ(c.n_layers, 3);
  EXPECT_EQ(c.n_heads, 4);
  EXPECT_EQ(c.n_kv_heads, 2);
  EXPECT_EQ(c.vocab_size, 50);
  EXPECT_EQ(c.context_length, 32);
  EXPECT_FALSE(c.tied_embeddings);
  EXPECT_EQ(c.rope_layout, RopeLayout::adjacent_pairs);
  EXPECT_EQ(c.rope_theta, 10000.0f);
  EXPECT_EQ(c.rms_eps, 1e-5f);
  EXPECT_TRUE(weights_match(c, m->weights));
  const ModelWeights& w = m->weights;
  const int L = 3;
  EXPECT_FLOAT_EQ(tag(w.token_embedding.values), 0);
  EXPECT_FLOAT_EQ(tag(w.token_embedding.values, 799), 0);
  for (int l = 0; l < L; ++l) {
    const LayerWeights& x = w.layers[l];
    EXPECT_FLOAT_EQ(tag(x.attn_norm), 1 + 0 * L + l);
    EXPECT_FLOAT_EQ(tag(x.wq.values, 255), 1 + 1 * L + l);
    EXPECT_FLOAT_EQ(tag(x.wk.values), 1 + 2 * L + l);
    EXPECT_FLOAT_EQ(tag(x.wv.values, 127), 1 + 3 * L + l);
    EXPECT_FLOAT_EQ(tag(x.wo.values), 1 + 4 * L + l);
    EXPECT_FLOAT_EQ(tag(x.ffn_norm), 1 + 5 * L + l);
    EXPECT_FLOAT_EQ(tag(x.w1.values), 1 + 6 * L + l);
    EXPECT_FLOAT_EQ(tag(x.w2.values, 639), 1 + 7 * L + l);
    EXPECT_FLOAT_EQ(tag(x.w3.values), 1 + 8 * L + l);
  }
  EXPECT_FLOAT_EQ(tag(w.final_norm, 15), 1 + 9 * L);
  // The two RoPE tables (1 + 9L + 1, + 2) are skipped; the classifier follows them.
  EXPECT_FLOAT_EQ(tag(w.classifier.values), 1 + 9 * L + 3);
  EXPECT_FLOAT_EQ(tag(w.classifier.values, 799), 1 + 9 * L + 3);
  EXPECT_EQ(m->eos_ids, (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(m->tokenizer, nullptr);
}

TEST(Llama2c, SharedClassifierIsTied) {
  const Checkpoint ck{16, 40, 1, 2, 2, 20, 8, true};
  auto m = parse_llama2c(ck.bytes(), "shared.bin");
  ASSERT_TRUE(m) << m.error().message;
  EXPECT_TRUE(m->config.tied_embeddings);
  EXPECT_TRUE(m->weights.classifier.values.empty());
  EXPECT_TRUE(weights_match(m->config, m->weights));
}

TEST(Llama2c, Stories260K) {
  CONVEYOR_REQUIRE_MODEL(path, "stories260K.bin");
  auto m = load_model(path);
  ASSERT_TRUE(m) << m.error().message;
  const ModelConfig& c = m->config;
  EXPECT_EQ(c.name, "stories260K");
  EXPECT_EQ(c.dim, 64);
  EXPECT_EQ(c.hidden_dim, 172);
  EXPECT_EQ(c.n_layers, 5);
  EXPECT_EQ(c.n_heads, 8);
  EXPECT_EQ(c.n_kv_heads, 4);
  EXPECT_EQ(c.vocab_size, 512);
  EXPECT_EQ(c.context_length, 512);
  EXPECT_TRUE(c.tied_embeddings);
  EXPECT_EQ(c.rope_layout, RopeLayout::adjacent_pairs);
  EXPECT_TRUE(weights_match(c, m->weights));
  EXPECT_EQ(m->eos_ids, (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(m->tokenizer, nullptr);
  // Spot values straight from the file's bytes.
  const std::vector<uint8_t> raw = test::read_bytes(path);
  auto at = [&](size_t float_index) {
    float f;
    std::memcpy(&f, raw.data() + 28 + 4 * float_index, 4);
    return f;
  };
  EXPECT_EQ(m->weights.token_embedding.values[0], at(0));
  const size_t embed = 512 * 64, norms = 5 * 64, wq = 5 * 64 * 64, wk = 5 * 32 * 64;
  EXPECT_EQ(m->weights.layers[0].attn_norm[3], at(embed + 3));
  EXPECT_EQ(m->weights.layers[2].wq.values[5], at(embed + norms + 2 * 64 * 64 + 5));
  EXPECT_EQ(m->weights.layers[4].wv.values.back(), at(embed + norms + wq + wk + wk - 1));
  const size_t ffn = 5 * 172 * 64;
  const size_t final_norm = embed + norms + wq + 2 * wk + wq + norms + 3 * ffn;
  EXPECT_EQ(m->weights.final_norm[63], at(final_norm + 63));
  EXPECT_EQ(m->weights.layers[4].w3.values.back(), at(final_norm - 1));
}

TEST(Llama2c, TokenizerFromFile) {
  CONVEYOR_REQUIRE_MODEL(tok, "llama2-tokenizer.bin");
  test::TempDir dir;
  const std::string path = dir.file("v32000.bin");
  test::write_bytes(path, Checkpoint{8, 16, 1, 2, 1, 32000, 16, false}.bytes());
  LoadOptions options;
  options.tokenizer_path = tok;
  auto m = load_model(path, options);
  ASSERT_TRUE(m) << m.error().message;
  ASSERT_NE(m->tokenizer, nullptr);
  ASSERT_TRUE(m->vocabulary);
  EXPECT_EQ(m->tokenizer_model, "llama");
  EXPECT_EQ(m->tokenizer->vocab_size(), 32000);
  const Vocabulary& v = *m->vocabulary;
  EXPECT_EQ(v.pieces[1], "<s>");
  EXPECT_EQ(v.pieces[2], "</s>");
  EXPECT_EQ(v.pieces[29871], "\xE2\x96\x81");  // "▁"
  EXPECT_EQ(v.pieces[13], "<0x0A>");
  for (int32_t id = 0; id < 32000; id += 7) ASSERT_EQ(v.pieces[id], m->tokenizer->piece(id)) << id;
  const std::vector<int32_t> ids = m->tokenizer->encode("Once upon a time", true);
  EXPECT_EQ(ids.front(), 1);
  EXPECT_EQ(m->tokenizer->decode(ids), "Once upon a time");

  options.tokenizer_path = dir.file("missing.bin");
  auto missing = load_model(path, options);
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, Errc::io_error);
  EXPECT_NE(missing.error().message.find("missing.bin"), std::string::npos);
}

void expect_bad(const std::vector<uint8_t>& bytes, const std::string& needle,
                Errc code = Errc::bad_format) {
  auto m = parse_llama2c(bytes, "bad.bin");
  ASSERT_FALSE(m) << "expected an error mentioning " << needle;
  EXPECT_EQ(m.error().code, code) << m.error().message;
  EXPECT_NE(m.error().message.find("bad.bin"), std::string::npos) << m.error().message;
  EXPECT_NE(m.error().message.find(needle), std::string::npos) << m.error().message;
}

TEST(Llama2c, RejectsBadFiles) {
  const std::vector<uint8_t> good = Checkpoint{16, 40, 2, 4, 2, 50, 32, false}.bytes();
  ASSERT_TRUE(parse_llama2c(good, "good.bin"));
  for (size_t len : {size_t(0), size_t(4), size_t(27)})
    expect_bad({good.begin(), good.begin() + len}, "too short for a llama2.c header");
  for (size_t len = 28; len < good.size(); len += 37)
    expect_bad({good.begin(), good.begin() + len}, "truncated?");
  expect_bad({good.begin(), good.end() - 1}, "truncated?");
  std::vector<uint8_t> longer = good;
  longer.push_back(0);
  expect_bad(longer, "not a llama2.c checkpoint?");

  auto with_header = [&](int field, int32_t value) {
    std::vector<uint8_t> b = good;
    std::memcpy(b.data() + 4 * field, &value, 4);
    return b;
  };
  expect_bad(with_header(0, 1 << 30), "dim 1073741824 is outside");
  expect_bad(with_header(0, 0), "dim 0 is outside");
  expect_bad(with_header(1, -5), "hidden_dim -5 is outside");
  expect_bad(with_header(2, 1 << 20), "n_layers");
  expect_bad(with_header(3, 0), "n_heads 0");
  expect_bad(with_header(3, 5), "n_heads 5 does not divide dim 16");
  expect_bad(with_header(4, 3), "n_kv_heads 3 does not divide n_heads 4");
  expect_bad(with_header(5, INT32_MIN), "vocab_size");
  expect_bad(with_header(5, 0), "vocab_size 0");
  expect_bad(with_header(6, -1), "context_length -1");
  expect_bad(with_header(5, 51), "implies");
  expect_bad(with_header(0, 0x616b3432), "export version", Errc::unsupported);
}

TEST(Llama2c, RandomHeadersDoNotCrash) {
  const std::vector<uint8_t> good = Checkpoint{16, 40, 2, 4, 2, 50, 32, true}.bytes();
  std::mt19937 rng(7);
  for (int trial = 0; trial < 2000; ++trial) {
    std::vector<uint8_t> b = good;
    const int32_t v = int32_t(rng()) >> (rng() % 32);
    std::memcpy(b.data() + 4 * (rng() % 7), &v, 4);
    auto m = parse_llama2c(b, "rand.bin");
    if (m) {
      EXPECT_TRUE(weights_match(m->config, m->weights));
    }
  }
}

TEST(Llama2c, VocabularyParserRejectsBadFiles) {
  std::vector<uint8_t> b(4 + 3 * 8, 0);  // three empty tokens
  EXPECT_TRUE(parse_llama2c_vocabulary(b, 3, "t.bin"));
  EXPECT_FALSE(parse_llama2c_vocabulary(b, 4, "t.bin"));
  EXPECT_FALSE(parse_llama2c_vocabulary(b, 1 << 30, "t.bin"));
  const int32_t huge = 1 << 30;
  std::memcpy(b.data() + 8, &huge, 4);  // token 0's length
  auto e = parse_llama2c_vocabulary(b, 3, "t.bin");
  ASSERT_FALSE(e);
  EXPECT_NE(e.error().message.find("t.bin: token 0 has invalid length"), std::string::npos);
}

}  // namespace
}  // namespace conveyor
