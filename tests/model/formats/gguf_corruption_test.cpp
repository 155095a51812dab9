// Corrupt, truncated and hostile GGUF input: every case must give an Error
// that names the file and the problem, never a crash or an out-of-bounds read
// (run this test under ASan to check the latter).
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <random>

#include "model/formats/gguf_llama.hpp"
#include "model/formats/gguf_reader.hpp"
#include "model/formats/gguf_writer.hpp"
#include "tests/model/formats/formats_test_util.hpp"

namespace conveyor {
namespace {

constexpr const char* kName = "corrupt.gguf";

// A GGUF file as editable parts.
struct Parts {
  uint32_t version = 3;
  uint32_t alignment = 32;
  std::vector<std::pair<std::string, GgufValue>> metadata;
  struct Tensor {
    std::string name;
    std::vector<uint64_t> dims;
    uint32_t type;
    std::vector<uint8_t> bytes;
  };
  std::vector<Tensor> tensors;

  GgufValue* find(const std::string& key) {
    for (auto& [k, v] : metadata)
      if (k == key) return &v;
    return nullptr;
  }
  void set(const std::string& key, GgufValue value) {
    if (GgufValue* v = find(key)) {
      *v = std::move(value);
    } else {
      metadata.emplace_back(key, std::move(value));
    }
  }
  void erase(const std::string& key) {
    std::erase_if(metadata, [&](const auto& kv) { return kv.first == key; });
  }
  Tensor* tensor(const std::string& name) {
    for (Tensor& t : tensors)
      if (t.name == name) return &t;
    return nullptr;
  }
  std::vector<uint8_t> bytes() const {
    GgufBuilder b(alignment);
    b.version = version;
    for (const auto& [k, v] : metadata) b.add(k, v);
    for (const Tensor& t : tensors) b.add_raw_tensor(t.name, t.dims, t.type, t.bytes);
    auto out = b.to_bytes();
    EXPECT_TRUE(out);
    return out ? *out : std::vector<uint8_t>{};
  }
};

// A valid small llama GGUF (vocabulary of 300 tokens), as parts.
Parts valid_parts() {
  static const std::vector<uint8_t> file = [] {
    auto bytes = serialize_gguf(test::small_model(false));
    EXPECT_TRUE(bytes);
    return *bytes;
  }();
  auto parsed = parse_gguf(file, "valid.gguf");
  EXPECT_TRUE(parsed);
  Parts p;
  p.version = parsed->version;
  p.metadata = parsed->metadata;
  for (const GgufTensorInfo& t : parsed->tensors)
    p.tensors.push_back({t.name, t.dims, t.type, std::vector<uint8_t>(t.data.begin(), t.data.end())});
  return p;
}

// Parses and converts; the Error when either fails.
std::optional<Error> load_error(const std::vector<uint8_t>& bytes) {
  auto file = parse_gguf(bytes, kName);
  if (!file) return file.error();
  auto model = llama_from_gguf(*file);
  if (!model) return model.error();
  return std::nullopt;
}

void expect_error(const std::vector<uint8_t>& bytes, Errc code, const std::string& needle) {
  const std::optional<Error> e = load_error(bytes);
  ASSERT_TRUE(e.has_value()) << "no error; expected one mentioning '" << needle << "'";
  EXPECT_EQ(int(e->code), int(code)) << e->message;
  EXPECT_NE(e->message.find(kName), std::string::npos) << e->message;
  EXPECT_NE(e->message.find(needle), std::string::npos) << e->message;
}

void patch_u64(std::vector<uint8_t>& bytes, size_t offset, uint64_t v) {
  std::memcpy(bytes.data() + offset, &v, 8);
}

TEST(GgufCorruption, ValidFileLoads) {
  EXPECT_FALSE(load_error(valid_parts().bytes()).has_value());
}

TEST(GgufCorruption, TruncationAnywhereIsAnError) {
  const std::vector<uint8_t> whole = valid_parts().bytes();
  auto parsed = parse_gguf(whole, kName);
  ASSERT_TRUE(parsed);
  const size_t header_end = size_t(parsed->data_offset) + 64;
  size_t checked = 0;
  for (size_t len = 0; len < whole.size(); len += len < header_end ? 1 : 997) {
    const std::vector<uint8_t> cut(whole.begin(), whole.begin() + len);
    const std::optional<Error> e = load_error(cut);
    ASSERT_TRUE(e.has_value()) << "truncated to " << len << " bytes, no error";
    ASSERT_EQ(e->code, Errc::bad_format) << e->message;
    ASSERT_TRUE(e->message.find("truncated") != std::string::npos ||
                e->message.find("outside the file") != std::string::npos ||
                e->message.find("impossible") != std::string::npos)
        << len << ": " << e->message;
    ++checked;
  }
  EXPECT_GT(checked, 1000u);
}

TEST(GgufCorruption, HeaderFields) {
  std::vector<uint8_t> b = valid_parts().bytes();
  {
    auto x = b;
    x[0] = 'X';
    expect_error(x, Errc::bad_format, "not a GGUF file");
  }
  {
    auto x = b;
    x[4] = 1;  // version 1
    expect_error(x, Errc::unsupported, "version 1");
  }
  {
    auto x = b;
    x[4] = 9;
    expect_error(x, Errc::unsupported, "version 9");
  }
  {
    auto x = b;
    x[4] = 0;
    x[7] = 3;  // a big-endian file's version as read little-endian
    expect_error(x, Errc::unsupported, "big-endian");
  }
  {
    auto x = b;
    patch_u64(x, 8, uint64_t(1) << 60);
    expect_error(x, Errc::bad_format, "tensor count 1152921504606846976 is impossible");
  }
  {
    auto x = b;
    patch_u64(x, 16, uint64_t(1) << 60);
    expect_error(x, Errc::bad_format, "metadata count 1152921504606846976 is impossible");
  }
  {
    auto x = b;
    patch_u64(x, 8, ~uint64_t(0));
    expect_error(x, Errc::bad_format, "impossible");
  }
  // One count too many: the parser reads tensor data as descriptions and must
  // still fail cleanly.
  for (size_t offset : {8u, 16u}) {
    auto x = b;
    uint64_t count;
    std::memcpy(&count, x.data() + offset, 8);
    patch_u64(x, offset, count + 1);
    const std::optional<Error> e = load_error(x);
    ASSERT_TRUE(e.has_value());
    EXPECT_NE(e->message.find(kName), std::string::npos);
    patch_u64(x, offset, count - 1);
    EXPECT_TRUE(load_error(x).has_value());
  }
}

TEST(GgufCorruption, ValueEncodings) {
  // A key whose string length runs past the end of the file.
  std::vector<uint8_t> b = valid_parts().bytes();
  patch_u64(b, 24, uint64_t(1) << 40);  // length of the first key
  expect_error(b, Errc::bad_format, "truncated");

  Parts p = valid_parts();
  GgufArray deep = GgufArray::of_strings({"x"});
  for (int i = 0; i < kMaxGgufArrayDepth + 1; ++i) {
    GgufArray outer;
    outer.elem_type = GgufValueType::array;
    outer.arrays = {deep};
    deep = outer;
  }
  p.set("deep", GgufValue::of_array(deep));
  expect_error(p.bytes(), Errc::bad_format, "nested more than");

  p = valid_parts();
  p.metadata.insert(p.metadata.begin(), {"general.architecture", GgufValue::of_string("llama")});
  expect_error(p.bytes(), Errc::bad_format, "duplicate metadata key 'general.architecture'");

  // Unknown value type: write a uint32 value, then patch its type number.
  p = valid_parts();
  p.metadata.insert(p.metadata.begin(), {"zz", GgufValue::of_uint32(5)});
  std::vector<uint8_t> x = p.bytes();
  const size_t type_at = 24 + 8 + 2;  // first key: length, "zz", then its type
  x[type_at] = 13;
  expect_error(x, Errc::bad_format, "unknown value type 13");
  x[type_at] = uint8_t(GgufValueType::array);  // now an array whose header is the value bytes
  EXPECT_TRUE(load_error(x).has_value());

  // An array claiming far more elements than the file holds.
  p = valid_parts();
  p.metadata.insert(p.metadata.begin(), {"a", GgufValue::of_array(GgufArray::of_strings({"q"}))});
  x = p.bytes();
  patch_u64(x, 24 + 8 + 1 + 4 + 4, uint64_t(1) << 61);
  expect_error(x, Errc::bad_format, "claims 2305843009213693952 elements");
}

TEST(GgufCorruption, TensorDescriptions) {
  Parts p = valid_parts();
  p.tensor("output_norm.weight")->dims = {64, 1, 1, 1, 1};
  expect_error(p.bytes(), Errc::bad_format, "5 dimensions");

  p = valid_parts();
  p.tensor("output_norm.weight")->dims = {uint64_t(1) << 40, uint64_t(1) << 40};
  expect_error(p.bytes(), Errc::bad_format, "element count overflows");

  p = valid_parts();
  p.tensor("output_norm.weight")->dims = {uint64_t(1) << 31, uint64_t(1) << 31};
  expect_error(p.bytes(), Errc::bad_format, "is absurdly large");

  // The last tensor may claim more data than the file holds.
  p = valid_parts();
  p.tensors.back().dims = {uint64_t(1) << 20, uint64_t(1) << 20};
  expect_error(p.bytes(), Errc::bad_format, "outside the file");

  p = valid_parts();
  p.tensor("output_norm.weight")->dims = {~uint64_t(0)};
  expect_error(p.bytes(), Errc::bad_format, "absurd");

  p = valid_parts();
  p.tensor("blk.0.attn_q.weight")->type = 99;
  expect_error(p.bytes(), Errc::bad_format, "'blk.0.attn_q.weight' has unknown type 99");

  p = valid_parts();
  p.tensors.push_back(p.tensors[3]);
  expect_error(p.bytes(), Errc::bad_format, "duplicate tensor '" + p.tensors[3].name + "'");

  // A changed type (or shape) changes the tensor's size; the next tensor's
  // offset then no longer follows it.
  p = valid_parts();
  p.tensor("blk.0.attn_q.weight")->type = uint32_t(GgmlType::Q8_0);
  expect_error(p.bytes(), Errc::bad_format, "expected");
  p = valid_parts();
  p.tensor("blk.0.attn_q.weight")->dims = {64, 32};
  expect_error(p.bytes(), Errc::bad_format, "(tensors must follow each other in order");
  p = valid_parts();
  p.tensor("output_norm.weight")->dims = {48};
  p.tensor("output_norm.weight")->type = uint32_t(GgmlType::Q8_0);
  expect_error(p.bytes(), Errc::bad_format, "not a multiple of the Q8_0 block size 32");

  // Misaligned data offset: patch the last tensor's offset field.
  p = valid_parts();
  std::vector<uint8_t> x = p.bytes();
  auto parsed = parse_gguf(x, kName);
  ASSERT_TRUE(parsed);
  // The last description ends with its 8-byte offset: search back for it.
  const uint64_t last_offset = parsed->tensors.back().offset;
  for (size_t i = size_t(parsed->data_offset) - 8;; --i) {
    uint64_t v;
    std::memcpy(&v, x.data() + i, 8);
    if (v == last_offset) {
      patch_u64(x, i, last_offset + 4);
      break;
    }
    ASSERT_GT(i, 24u);
  }
  expect_error(x, Errc::bad_format, "not a multiple of the alignment 32");

  p = valid_parts();
  p.set("general.alignment", GgufValue::of_uint32(24));
  expect_error(p.bytes(), Errc::bad_format, "general.alignment must be a power of two");
  p.set("general.alignment", GgufValue::of_string("32"));
  expect_error(p.bytes(), Errc::bad_format, "general.alignment");
}

TEST(GgufCorruption, ModelLevelProblems) {
  Parts p = valid_parts();
  p.set("general.architecture", GgufValue::of_string("falcon"));
  expect_error(p.bytes(), Errc::unsupported, "architecture 'falcon' is not supported");

  p = valid_parts();
  p.erase("general.architecture");
  expect_error(p.bytes(), Errc::bad_format, "'general.architecture' is missing");

  p = valid_parts();
  p.set("llama.block_count", GgufValue::of_string("2"));
  expect_error(p.bytes(), Errc::bad_format, "'llama.block_count' must be an integer");

  p = valid_parts();
  p.set("llama.attention.head_count", GgufValue::of_uint32(0));
  expect_error(p.bytes(), Errc::bad_format, "'llama.attention.head_count' is out of range");

  p = valid_parts();
  p.set("llama.attention.head_count", GgufValue::of_uint32(7));
  expect_error(p.bytes(), Errc::bad_format, "n_heads 7 does not divide dim 64");

  p = valid_parts();
  p.set("llama.block_count", GgufValue::of_uint32(3));
  expect_error(p.bytes(), Errc::bad_format, "missing tensor 'blk.2.attn_norm.weight'");

  p = valid_parts();
  p.set("llama.feed_forward_length", GgufValue::of_uint32(1u << 31));
  expect_error(p.bytes(), Errc::bad_format, "out of range");

  p = valid_parts();
  p.set("llama.feed_forward_length", GgufValue::of_uint32(128));
  expect_error(p.bytes(), Errc::bad_format, "'blk.0.ffn_gate.weight' has shape [64, 96], expected [64, 128]");

  p = valid_parts();
  std::erase_if(p.tensors, [](const auto& t) { return t.name == "blk.1.ffn_up.weight"; });
  expect_error(p.bytes(), Errc::bad_format, "missing tensor 'blk.1.ffn_up.weight'");

  p = valid_parts();
  Parts::Tensor* q = p.tensor("blk.1.attn_k.weight");
  q->type = uint32_t(GgmlType::Q2_K);
  q->dims = {256, 8};
  q->bytes.assign(84 * 8, 0);
  p.tensor("blk.1.attn_q.weight")->type = uint32_t(GgmlType::Q5_0);
  p.tensor("blk.1.attn_q.weight")->bytes.assign(64 * 64 / 32 * 22, 0);
  expect_error(p.bytes(), Errc::unsupported, "Q5_0 (6)");

  p = valid_parts();
  p.set("llama.rope.scaling.type", GgufValue::of_string("yarn"));
  expect_error(p.bytes(), Errc::bad_format, "'llama.rope.scaling.factor' is missing");
  p.set("llama.rope.scaling.factor", GgufValue::of_float32(4.0f));
  expect_error(p.bytes(), Errc::bad_format, "'llama.rope.scaling.original_context_length' is missing");
  p.set("llama.rope.scaling.type", GgufValue::of_string("longrope"));
  expect_error(p.bytes(), Errc::unsupported, "conveyor implements none, linear and yarn");
  p.set("llama.rope.scaling.type", GgufValue::of_string("linear"));
  p.set("llama.rope.scaling.factor", GgufValue::of_float32(-2.0f));
  expect_error(p.bytes(), Errc::bad_format, "RoPE scaling factor");

  p = valid_parts();
  p.set("llama.attention.value_length", GgufValue::of_uint32(4));
  expect_error(p.bytes(), Errc::unsupported, "value_length' is 4, but key_length is");

  p = valid_parts();
  p.set("llama.expert_count", GgufValue::of_uint32(8));
  expect_error(p.bytes(), Errc::unsupported, "mixture-of-experts");
}

TEST(GgufCorruption, TokenizerProblems) {
  Parts p = valid_parts();
  p.set("tokenizer.ggml.tokens", GgufValue::of_array(GgufArray::of_strings({"a", "b", "c"})));
  expect_error(p.bytes(), Errc::bad_format, "tokenizer.ggml");

  p = valid_parts();
  p.set("tokenizer.ggml.bos_token_id", GgufValue::of_uint32(300));
  expect_error(p.bytes(), Errc::bad_format, "'tokenizer.ggml.bos_token_id' is 300, outside the vocabulary");

  p = valid_parts();
  p.set("tokenizer.ggml.model", GgufValue::of_string("bert"));
  expect_error(p.bytes(), Errc::unsupported, "'bert'");

  p = valid_parts();
  const std::vector<float> few(5, 0.0f);
  p.set("tokenizer.ggml.scores", GgufValue::of_array(GgufArray::of_float32(few)));
  expect_error(p.bytes(), Errc::bad_format, "'tokenizer.ggml.scores' has 5 entries for 300 tokens");

  p = valid_parts();
  p.set("tokenizer.ggml.tokens", GgufValue::of_uint32(3));
  expect_error(p.bytes(), Errc::bad_format, "'tokenizer.ggml.tokens' must be an array");

  p = valid_parts();
  std::vector<int32_t> types(300, 1);
  types[7] = 42;
  p.set("tokenizer.ggml.token_type", GgufValue::of_array(GgufArray::of_int32(types)));
  expect_error(p.bytes(), Errc::bad_format, "invalid type 42 for token 7");

  p = valid_parts();
  p.set("tokenizer.ggml.model", GgufValue::of_string("gpt2"));  // needs merges
  expect_error(p.bytes(), Errc::bad_format, "'tokenizer.ggml.merges' is missing");
}

TEST(GgufCorruption, SharedFileTruncated) {
  CONVEYOR_REQUIRE_MODEL(path, "tiny-random-llama-q8_0.gguf");
  const std::vector<uint8_t> whole = test::read_bytes(path);
  ASSERT_FALSE(whole.empty());
  for (size_t i = 0; i < 60; ++i) {
    // Dense in the header (the first ~725 KB), sparser in the tensor data.
    const size_t len = i < 40 ? i * 18131 + i % 7 : whole.size() - (60 - i) * 71111 - 1;
    const std::vector<uint8_t> cut(whole.begin(), whole.begin() + len);
    const std::optional<Error> e = load_error(cut);
    ASSERT_TRUE(e.has_value()) << len;
    EXPECT_EQ(e->code, Errc::bad_format) << e->message;
    EXPECT_NE(e->message.find(kName), std::string::npos);
  }
}

// Deterministic random corruption of the header region: whatever happens,
// no crash, and an error (if any) names the file.
TEST(GgufCorruption, RandomByteFlipsDoNotCrash) {
  const std::vector<uint8_t> whole = valid_parts().bytes();
  auto parsed = parse_gguf(whole, kName);
  ASSERT_TRUE(parsed);
  const size_t header = size_t(parsed->data_offset);
  std::mt19937 rng(12345);
  int errors = 0;
  for (int trial = 0; trial < 400; ++trial) {
    std::vector<uint8_t> x = whole;
    const int flips = 1 + int(rng() % 4);
    for (int f = 0; f < flips; ++f) x[rng() % header] ^= uint8_t(1u << (rng() % 8));
    const std::optional<Error> e = load_error(x);
    if (e) {
      ++errors;
      EXPECT_NE(e->message.find(kName), std::string::npos) << e->message;
    }
  }
  EXPECT_GT(errors, 0);
}

}  // namespace
}  // namespace conveyor
