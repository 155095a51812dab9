#include "model/tokenizer/detokenizer.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/model/tokenizer/test_util.hpp"

namespace conveyor {
namespace {

const std::string kFffd = "\xEF\xBF\xBD";

// Pushes `ids` one at a time; every chunk must be valid UTF-8.
std::string stream(const Tokenizer& tokenizer, const std::vector<int32_t>& ids,
                   std::vector<std::string>* chunks = nullptr) {
  IncrementalDetokenizer detokenizer(tokenizer);
  std::string text;
  for (int32_t id : ids) {
    const std::string chunk = detokenizer.push(id);
    EXPECT_TRUE(test::valid_utf8(chunk)) << "after token " << id;
    if (chunks) chunks->push_back(chunk);
    text += chunk;
  }
  const std::string rest = detokenizer.flush();
  EXPECT_TRUE(test::valid_utf8(rest));
  if (chunks) chunks->push_back(rest);
  return text + rest;
}

TEST(IncrementalDetokenizer, HoldsASplitCharacterUntilComplete) {
  const auto bytes = make_byte_tokenizer();
  std::vector<std::string> chunks;
  const std::string text = stream(*bytes, {256, 'a', 0xF0, 0x9F, 0xA6, 0x99, 'b', 257}, &chunks);
  EXPECT_EQ(text, "a\xF0\x9F\xA6\x99" "b");
  EXPECT_EQ(chunks, (std::vector<std::string>{"", "a", "", "", "", "\xF0\x9F\xA6\x99", "b", "", ""}));
}

TEST(IncrementalDetokenizer, InvalidBytesAreReplacedAtOnce) {
  const auto bytes = make_byte_tokenizer();
  IncrementalDetokenizer detokenizer(*bytes);
  EXPECT_EQ(detokenizer.push(0xFF), kFffd);      // can never start a character
  EXPECT_EQ(detokenizer.push(0xE2), "");         // may start one
  EXPECT_EQ(detokenizer.push('('), kFffd + "(");  // ...but did not
  EXPECT_EQ(detokenizer.push(0xC0), kFffd);      // overlong lead
  EXPECT_EQ(detokenizer.push(0xED), "");
  EXPECT_EQ(detokenizer.push(0xA0), kFffd + kFffd);  // surrogate
  EXPECT_EQ(detokenizer.push(0x80), kFffd);
  EXPECT_EQ(detokenizer.flush(), "");
}

TEST(IncrementalDetokenizer, FlushReplacesAnUnfinishedCharacter) {
  const auto bytes = make_byte_tokenizer();
  IncrementalDetokenizer detokenizer(*bytes);
  EXPECT_EQ(detokenizer.push('x'), "x");
  EXPECT_EQ(detokenizer.push(0xF0), "");
  EXPECT_EQ(detokenizer.push(0x9F), "");
  EXPECT_EQ(detokenizer.flush(), kFffd);
  EXPECT_EQ(detokenizer.flush(), "");
  EXPECT_EQ(detokenizer.push('y'), "y");  // usable after a flush
}

TEST(IncrementalDetokenizer, RandomBytesAlwaysStreamValidText) {
  const auto bytes = make_byte_tokenizer();
  uint32_t state = 1;
  for (int round = 0; round < 300; ++round) {
    std::vector<int32_t> ids;
    for (int i = 0; i < 24; ++i) {
      state = state * 1664525u + 1013904223u;
      ids.push_back(static_cast<int32_t>(state >> 24));
    }
    stream(*bytes, ids);
  }
}

TEST(IncrementalDetokenizer, StreamsLlama2TokensKeepingTheLeadingSpace) {
  CONVEYOR_LLAMA2_TOKENIZER_OR_SKIP(tokenizer);
  const std::vector<std::string> texts = {
      "Hello world",
      "llama \xF0\x9F\xA6\x99 emoji \xF0\x9F\x98\x80\xF0\x9F\x91\x8D",
      "\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E and caf\xC3\xA9\n\tnext line",
  };
  for (const std::string& text : texts) {
    const std::vector<int32_t> ids = tokenizer.encode(text, true);
    // Streaming continues a prompt, so the leading space is kept.
    EXPECT_EQ(stream(tokenizer, ids), " " + text);
    EXPECT_EQ(tokenizer.decode(ids), text);
  }
}

TEST(IncrementalDetokenizer, ByteTokensSplitOneCharacter) {
  CONVEYOR_LLAMA2_TOKENIZER_OR_SKIP(tokenizer);
  // U+1F999 through four byte-fallback tokens (byte b is token b + 3).
  std::vector<std::string> chunks;
  const std::string text = stream(tokenizer, {1, 0xF0 + 3, 0x9F + 3, 0xA6 + 3, 0x99 + 3, 15043}, &chunks);
  EXPECT_EQ(text, "\xF0\x9F\xA6\x99 Hello");
  EXPECT_EQ(chunks, (std::vector<std::string>{"", "", "", "", "\xF0\x9F\xA6\x99", " Hello", ""}));
}

}  // namespace
}  // namespace conveyor
