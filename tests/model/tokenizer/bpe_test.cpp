#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "model/tokenizer/tokenizer.hpp"
#include "tests/model/tokenizer/test_util.hpp"

namespace conveyor {
namespace {

using Ids = std::vector<int32_t>;

// GPT-2's bytes_to_unicode, written independently of the library.
std::string stand_in(int byte) {
  int cp = byte;
  const bool printable = (byte >= 33 && byte <= 126) || (byte >= 161 && byte <= 172) || byte >= 174;
  if (!printable) {
    int n = 0;
    for (int b = 0; b < byte; ++b) {
      if (!((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174)) ++n;
    }
    cp = 256 + n;
  }
  std::string out;
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
  return out;
}

// Ids 0..255: the stand-in of byte b; then merged pieces; then a control token.
constexpr int32_t kHe = 256, kLl = 257, kHell = 258, kHello = 259, kGw = 260, kOr = 261,
                  kGwor = 262, kLd = 263, kEl = 264, kEndOfText = 265;

Vocabulary tiny_vocab() {
  Vocabulary vocab;
  for (int b = 0; b < 256; ++b) vocab.pieces.push_back(stand_in(b));
  for (const char* piece : {"he", "ll", "hell", "hello", "\xC4\xA0w", "or", "\xC4\xA0wor", "ld", "el"}) {
    vocab.pieces.push_back(piece);
  }
  vocab.pieces.push_back("<|endoftext|>");
  vocab.types.assign(vocab.pieces.size(), TokenType::normal);
  vocab.types[kEndOfText] = TokenType::control;
  // Merges by priority; "l l" outranks "e l".
  vocab.merges = {"h e", "l l", "he ll", "hell o", "\xC4\xA0 w", "o r", "\xC4\xA0w or", "l d", "e l"};
  vocab.bos_id = kEndOfText;
  vocab.eos_id = kEndOfText;
  vocab.add_space_prefix = true;  // ignored by byte-level BPE
  return vocab;
}

std::unique_ptr<Tokenizer> make(Vocabulary vocab) {
  auto tokenizer = make_bpe_tokenizer(std::move(vocab));
  EXPECT_TRUE(tokenizer) << tokenizer.error().message;
  return tokenizer ? std::move(tokenizer).value() : nullptr;
}

TEST(Bpe, StandInsFollowGpt2) {
  EXPECT_EQ(stand_in(' '), "\xC4\xA0");   // Ġ
  EXPECT_EQ(stand_in('\n'), "\xC4\x8A");  // Ċ
  EXPECT_EQ(stand_in('A'), "A");
}

TEST(Bpe, AppliesMergesByRank) {
  const auto tokenizer = make(tiny_vocab());
  ASSERT_TRUE(tokenizer);
  EXPECT_EQ(tokenizer->encode("hello world", false), (Ids{kHello, kGwor, kLd}));
  EXPECT_EQ(tokenizer->encode("hello world", true), (Ids{kEndOfText, kHello, kGwor, kLd}));
  EXPECT_EQ(tokenizer->encode("ell", false), (Ids{'e', kLl}));  // "l l" before "e l"
  EXPECT_EQ(tokenizer->encode("el", false), (Ids{kEl}));
  EXPECT_EQ(tokenizer->encode("hex", false), (Ids{kHe, 'x'}));
  // Words that stop at a merge's intermediate piece keep it.
  EXPECT_EQ(tokenizer->encode("hell", false), (Ids{kHell}));
  EXPECT_EQ(tokenizer->encode("or w", false), (Ids{kOr, kGw}));
  // Pre-tokenization keeps merges inside words: " hello" is "Ġ" + "hello".
  EXPECT_EQ(tokenizer->encode("a hello", false), (Ids{'a', ' ', kHello}));
}

TEST(Bpe, DecodesStandInsBackToBytes) {
  const auto tokenizer = make(tiny_vocab());
  ASSERT_TRUE(tokenizer);
  EXPECT_EQ(tokenizer->token_bytes(kGwor), " wor");
  EXPECT_EQ(tokenizer->token_bytes('\n'), "\n");
  EXPECT_EQ(tokenizer->token_bytes(kEndOfText), "");
  EXPECT_EQ(tokenizer->piece(kGwor), "\xC4\xA0wor");
  EXPECT_EQ(tokenizer->decode(Ids{kEndOfText, kHello, kGwor, kLd, kEndOfText}), "hello world");
}

TEST(Bpe, RoundTrips) {
  const auto tokenizer = make(tiny_vocab());
  ASSERT_TRUE(tokenizer);
  const std::vector<std::string> texts = {
      "hello world",
      "  leading spaces, trailing  ",
      "tabs\tand\nnewlines\r\n\n",
      "don't stop; it's 2024!",
      "caf\xC3\xA9 \xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E \xF0\x9F\xA6\x99\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD",
      "<|endoftext|> stays text",
      std::string("nul\0byte", 8),
  };
  for (const std::string& text : texts) {
    const Ids ids = tokenizer->encode(text, false);
    EXPECT_EQ(std::count(ids.begin(), ids.end(), kEndOfText), 0) << text;
    EXPECT_EQ(tokenizer->decode(ids), text);
  }
}

TEST(Bpe, LongWordsRoundTrip) {
  const auto tokenizer = make(tiny_vocab());
  ASSERT_TRUE(tokenizer);
  std::string one_word;
  while (one_word.size() < 20000) one_word += "hellowell";
  const Ids ids = tokenizer->encode(one_word, false);
  EXPECT_EQ(ids.front(), kHello);
  EXPECT_EQ(tokenizer->decode(ids), one_word);
}

TEST(Bpe, InvalidUtf8BecomesReplacementOnDecode) {
  const auto tokenizer = make(tiny_vocab());
  ASSERT_TRUE(tokenizer);
  const Ids ids = tokenizer->encode("a\xFF" "b", false);
  EXPECT_EQ(ids, (Ids{'a', 0xFF, 'b'}));  // every byte has a token
  EXPECT_EQ(tokenizer->decode(ids), "a\xEF\xBF\xBD" "b");
}

TEST(Bpe, CharactersMissingFromTheVocabularyUseUnk) {
  Vocabulary vocab;
  vocab.pieces = {"<unk>", "a", "b", "ab"};
  vocab.types = {TokenType::unknown, TokenType::normal, TokenType::normal, TokenType::normal};
  vocab.merges = {"a b"};
  vocab.unk_id = 0;
  const auto tokenizer = make(vocab);
  ASSERT_TRUE(tokenizer);
  EXPECT_EQ(tokenizer->encode("abcab", false), (Ids{3, 0, 3}));
}

TEST(Bpe, RejectsMalformedMerges) {
  for (const char* merge : {"nospace", " a", "a ", ""}) {
    Vocabulary vocab = tiny_vocab();
    vocab.merges.push_back(merge);
    auto result = make_bpe_tokenizer(vocab);
    ASSERT_FALSE(result) << merge;
    EXPECT_EQ(result.error().code, Errc::bad_format);
  }
}

}  // namespace
}  // namespace conveyor
