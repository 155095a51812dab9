// Added tokens in text: user-defined always, control only with parse_special
// and outside verbatim ranges, leftmost then longest; on both a byte-level BPE
// and a SentencePiece vocabulary.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "model/tokenizer/tokenizer.hpp"

namespace conveyor {
namespace {

using Ids = std::vector<int32_t>;

// GPT-2's stand-in for a byte (only printable ASCII is used in these tests).
std::string stand_in(char c) { return std::string(1, c); }

// Byte-level BPE without merges: id b is byte b (stand-ins for printable
// ASCII; the other bytes get placeholder pieces that text never produces).
constexpr int32_t kImStart = 256, kIm = 257, kThink = 258, kAb = 259, kBcd = 260, kBos = 261;

Vocabulary bpe_vocab() {
  Vocabulary v;
  for (int b = 0; b < 256; ++b)
    v.pieces.push_back(b >= 33 && b <= 126 ? stand_in(char(b)) : "<byte" + std::to_string(b) + ">");
  v.pieces.insert(v.pieces.end(), {"<|im_start|>", "<|im|>", "<think>", "ab", "bcd", "<|bos|>"});
  v.types.assign(v.pieces.size(), TokenType::normal);
  for (int b = 0; b < 256; ++b)
    if (b < 33 || b > 126) v.types[b] = TokenType::unused;
  v.types[kImStart] = TokenType::control;
  v.types[kIm] = TokenType::control;
  v.types[kThink] = TokenType::user_defined;
  v.types[kAb] = TokenType::control;
  v.types[kBcd] = TokenType::user_defined;
  v.types[kBos] = TokenType::control;
  v.bos_id = kBos;
  v.add_bos = true;
  v.pre = "llama-bpe";
  return v;
}

std::unique_ptr<Tokenizer> bpe() {
  auto t = make_bpe_tokenizer(bpe_vocab());
  EXPECT_TRUE(t) << t.error().message;
  return t ? std::move(t).value() : nullptr;
}

Ids bytes(std::string_view s) {
  Ids out;
  for (char c : s) out.push_back(uint8_t(c));
  return out;
}

Ids cat(std::initializer_list<Ids> parts) {
  Ids out;
  for (const Ids& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

EncodeOptions special(std::span<const TextRange> verbatim = {}) {
  return EncodeOptions{.add_bos = false, .parse_special = true, .verbatim = verbatim};
}

TEST(AddedTokens, ControlTokensNeedParseSpecial) {
  const auto t = bpe();
  ASSERT_TRUE(t);
  EXPECT_EQ(t->encode("<|im_start|>hi", false), bytes("<|im_start|>hi"));
  EXPECT_EQ(t->encode("<|im_start|>hi", special()), cat({{kImStart}, bytes("hi")}));
  // BOS first, then the parsed token.
  EXPECT_EQ(t->encode("<|im_start|>", EncodeOptions{.add_bos = true, .parse_special = true}),
            (Ids{kBos, kImStart}));
  EXPECT_EQ(t->encode("<|bos|>", EncodeOptions{.add_bos = true}), cat({{kBos}, bytes("<|bos|>")}));
}

TEST(AddedTokens, UserDefinedTokensAlwaysMatch) {
  const auto t = bpe();
  ASSERT_TRUE(t);
  EXPECT_EQ(t->encode("x<think>y", false), cat({bytes("x"), {kThink}, bytes("y")}));
  EXPECT_EQ(t->encode("<think><think>", special()), (Ids{kThink, kThink}));
  // Even inside a verbatim range.
  const TextRange all{0, 100};
  EXPECT_EQ(t->encode("<think>", special({&all, 1})), (Ids{kThink}));
}

TEST(AddedTokens, LongestTokenAtTheLeftmostPosition) {
  const auto t = bpe();
  ASSERT_TRUE(t);
  EXPECT_EQ(t->encode("<|im|>x<|im_start|><|im_", special()),
            cat({{kIm}, bytes("x"), {kImStart}, bytes("<|im_")}));
  // "ab" starts first, so "bcd" cannot match (Hugging Face's leftmost-longest).
  EXPECT_EQ(t->encode("abcd", special()), cat({{kAb}, bytes("cd")}));
  EXPECT_EQ(t->encode("abcd", false), cat({bytes("a"), {kBcd}}));  // control "ab" not parsed
}

TEST(AddedTokens, VerbatimRangesKeepControlTokensAsText) {
  const auto t = bpe();
  ASSERT_TRUE(t);
  const std::string text = "A<|im_start|>B<|im_start|>";
  // The first token lies inside [1, 13); the second is outside.
  const TextRange first{1, 13};
  EXPECT_EQ(t->encode(text, special({&first, 1})),
            cat({bytes("A<|im_start|>B"), {kImStart}}));
  // A range that only touches part of a token still protects it.
  const TextRange tail{12, 13};
  EXPECT_EQ(t->encode(text, special({&tail, 1})), cat({bytes("A<|im_start|>B"), {kImStart}}));
  // A range that ends where the token starts does not.
  const TextRange before{0, 1};
  EXPECT_EQ(t->encode(text, special({&before, 1})),
            cat({bytes("A"), {kImStart}, bytes("B"), {kImStart}}));
  // Unsorted, overlapping and out-of-range ranges are fine.
  const TextRange messy[] = {{20, 1000}, {2, 5}, {0, 3}, {7, 7}};
  EXPECT_EQ(t->encode(text, special(messy)), cat({bytes("A<|im_start|>B<|im_start|>")}));
  // A protected token stays text; the same token after the range is parsed.
  const TextRange mid{3, 4};
  EXPECT_EQ(t->encode("<|im|><|im|>", special({&mid, 1})), cat({bytes("<|im|>"), {kIm}}));
}

TEST(AddedTokens, EmptyTextAndNoAddedTokens) {
  const auto t = bpe();
  ASSERT_TRUE(t);
  EXPECT_EQ(t->encode("", special()), Ids{});
  EXPECT_EQ(t->encode("", EncodeOptions{}), Ids{kBos});
  EXPECT_EQ(t->encode("<|im", special()), bytes("<|im"));
}

// SentencePiece: <unk> <s> </s>, byte tokens, then pieces.
Vocabulary spm_vocab() {
  Vocabulary v;
  v.pieces = {"<unk>", "<s>", "</s>"};
  v.types = {TokenType::unknown, TokenType::control, TokenType::control};
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    v.pieces.push_back(name);
    v.types.push_back(TokenType::byte);
  }
  for (const char* p : {"\xE2\x96\x81" "a", "a", "\xE2\x96\x81", "<tool>"}) {
    v.pieces.push_back(p);
    v.types.push_back(TokenType::normal);
  }
  v.types.back() = TokenType::user_defined;
  v.scores.assign(v.pieces.size(), 0.0f);
  v.unk_id = 0;
  v.bos_id = 1;
  v.eos_id = 2;
  return v;
}

constexpr int32_t kSpaceA = 259, kA = 260, kSpace = 261, kTool = 262;
int32_t byte_token(char c) { return 3 + uint8_t(c); }

TEST(AddedTokens, SentencePieceSpaceAfterEachAddedToken) {
  auto made = make_sentencepiece_tokenizer(spm_vocab());
  ASSERT_TRUE(made) << made.error().message;
  const Tokenizer& t = **made;
  // As llama.cpp: the text after an added token gets the leading space again.
  EXPECT_EQ(t.encode("a<s>a", EncodeOptions{.parse_special = true}), (Ids{1, kSpaceA, 1, kSpaceA}));
  EXPECT_EQ(t.encode("a<tool>a", false), (Ids{kSpaceA, kTool, kSpaceA}));
  // Without parse_special, "<s>" is text: byte tokens for <, s and >.
  EXPECT_EQ(t.encode("a<s>", EncodeOptions{}),
            (Ids{1, kSpaceA, byte_token('<'), byte_token('s'), byte_token('>')}));
  // <unk> is parsed like a control token.
  EXPECT_EQ(t.encode("<unk>", special()), (Ids{0}));
  const TextRange all{0, 5};
  EXPECT_EQ(t.encode("<unk>", special({&all, 1})).front(), kSpace);
  EXPECT_EQ(t.encode("a", false), (Ids{kSpaceA}));
  EXPECT_NE(kA, kSpaceA);
}

}  // namespace
}  // namespace conveyor
