#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "model/tokenizer/tokenizer.hpp"
#include "tests/model/tokenizer/test_util.hpp"

namespace conveyor {
namespace {

using Ids = std::vector<int32_t>;

template <class T>
void put(std::vector<uint8_t>& out, T v) {
  const size_t at = out.size();
  out.resize(at + sizeof v);
  std::memcpy(out.data() + at, &v, sizeof v);
}

struct Entry {
  float score;
  std::string text;
};

// A tokenizer file as llama2.c's exporter writes it.
std::vector<uint8_t> file_bytes(const std::vector<Entry>& entries, int32_t max_len = 8) {
  std::vector<uint8_t> out;
  put<int32_t>(out, max_len);
  for (const Entry& e : entries) {
    put<float>(out, e.score);
    put<int32_t>(out, static_cast<int32_t>(e.text.size()));
    for (char c : e.text) out.push_back(static_cast<uint8_t>(c));
  }
  return out;
}

const std::vector<Entry> kTiny = {
    {0, "<unk>"}, {0, "\n<s>\n"}, {0, "\n</s>\n"}, {-1, " a"}, {-2, "b"}};
// Offset of token 3's length field: header, three tokens, then token 3's score.
constexpr size_t kToken3Length = 4 + (8 + 5) + (8 + 5) + (8 + 6) + 4;

TEST(Llama2cTokenizer, ParsesATinyFile) {
  const auto bytes = file_bytes(kTiny);
  auto tokenizer = parse_llama2c_tokenizer(bytes, 5, "tiny.bin");
  ASSERT_TRUE(tokenizer) << tokenizer.error().message;
  const Tokenizer& t = **tokenizer;
  EXPECT_EQ(t.vocab_size(), 5);
  EXPECT_EQ(t.piece(1), "<s>");
  EXPECT_EQ(t.piece(2), "</s>");
  EXPECT_EQ(t.piece(3), "\xE2\x96\x81" "a");  // a space is stored as "▁"
  // "▁a▁b": "▁a" merges; the lone "▁" has no piece and no byte tokens: <unk>.
  EXPECT_EQ(t.encode("a b", true), (Ids{1, 3, 0, 4}));
  EXPECT_EQ(t.decode(Ids{1, 3, 4}), "ab");
}

TEST(Llama2cTokenizer, ExtraTrailingBytesAreIgnored) {
  auto bytes = file_bytes(kTiny);
  bytes.push_back(0);
  EXPECT_TRUE(parse_llama2c_tokenizer(bytes, 5, "tiny.bin"));
  // Reading fewer tokens than the file holds is allowed too.
  EXPECT_TRUE(parse_llama2c_tokenizer(bytes, 4, "tiny.bin"));
}

TEST(Llama2cTokenizer, EveryTruncationIsAnError) {
  const auto bytes = file_bytes(kTiny);
  for (size_t size = 0; size < bytes.size(); ++size) {
    const std::span<const uint8_t> cut(bytes.data(), size);
    auto result = parse_llama2c_tokenizer(cut, 5, "cut.bin");
    ASSERT_FALSE(result) << "truncated to " << size << " bytes";
    EXPECT_EQ(result.error().code, Errc::bad_format);
    EXPECT_NE(result.error().message.find("cut.bin"), std::string::npos) << result.error().message;
  }
}

TEST(Llama2cTokenizer, RejectsBadLengths) {
  for (int32_t length : {-1, std::numeric_limits<int32_t>::min(), 1000, std::numeric_limits<int32_t>::max()}) {
    auto bytes = file_bytes(kTiny);
    std::memcpy(bytes.data() + kToken3Length, &length, 4);
    auto result = parse_llama2c_tokenizer(bytes, 5, "bad.bin");
    ASSERT_FALSE(result) << "length " << length;
    EXPECT_EQ(result.error().code, Errc::bad_format);
    EXPECT_NE(result.error().message.find("bad.bin"), std::string::npos);
    EXPECT_NE(result.error().message.find("token 3"), std::string::npos) << result.error().message;
  }
}

TEST(Llama2cTokenizer, RejectsBadHeaderAndSizes) {
  EXPECT_FALSE(parse_llama2c_tokenizer(file_bytes(kTiny, -5), 5, "neg.bin"));
  const auto bytes = file_bytes(kTiny);
  for (int32_t vocab_size : {-1, 0, 2, std::numeric_limits<int32_t>::max()}) {
    auto result = parse_llama2c_tokenizer(bytes, vocab_size, "tiny.bin");
    ASSERT_FALSE(result) << vocab_size;
    EXPECT_EQ(result.error().code, Errc::invalid_argument);
  }
  EXPECT_FALSE(parse_llama2c_tokenizer(bytes, 6, "tiny.bin"));  // asks for more than it holds
  auto nan = kTiny;
  nan[4].score = std::numeric_limits<float>::quiet_NaN();
  auto result = parse_llama2c_tokenizer(file_bytes(nan), 5, "nan.bin");
  ASSERT_FALSE(result);
  EXPECT_NE(result.error().message.find("nan.bin"), std::string::npos);
}

TEST(Llama2cTokenizer, MissingFileIsAnIoError) {
  auto result = load_llama2c_tokenizer("/nonexistent/tokenizer.bin", 32000);
  ASSERT_FALSE(result);
  EXPECT_EQ(result.error().code, Errc::io_error);
  EXPECT_NE(result.error().message.find("/nonexistent/tokenizer.bin"), std::string::npos);
}

TEST(Llama2cTokenizer, CorruptedRealFileNeverCrashes) {
  const std::string path = test::shared_model("llama2-tokenizer.bin");
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "needs " << path;
  const std::vector<uint8_t> bytes = test::read_bytes(path);
  ASSERT_TRUE(parse_llama2c_tokenizer(bytes, 32000, path));

  // Truncated at many offsets, including the first bytes and the very end.
  std::vector<size_t> cuts;
  for (size_t s = 0; s < 64; ++s) cuts.push_back(s);
  for (size_t s = 64; s < bytes.size(); s += 4999) cuts.push_back(s);
  for (size_t s = bytes.size() - 16; s < bytes.size(); ++s) cuts.push_back(s);
  for (size_t size : cuts) {
    auto result = parse_llama2c_tokenizer(std::span(bytes.data(), size), 32000, "cut");
    ASSERT_FALSE(result) << "truncated to " << size;
    ASSERT_EQ(result.error().code, Errc::bad_format);
  }

  // Length fields overwritten with garbage: an error or a (different) tokenizer.
  uint32_t state = 99;
  for (int round = 0; round < 20; ++round) {
    std::vector<uint8_t> damaged = bytes;
    for (int k = 0; k < 8; ++k) {
      state = state * 1664525u + 1013904223u;
      damaged[4 + state % (damaged.size() - 4)] = static_cast<uint8_t>(state >> 24);
    }
    auto result = parse_llama2c_tokenizer(damaged, 32000, "damaged");
    if (result) {
      const Ids ids = (*result)->encode("Hello world \xF0\x9F\xA6\x99", true);
      EXPECT_TRUE(test::valid_utf8((*result)->decode(ids)));
    }
  }
}

}  // namespace
}  // namespace conveyor
