#include "model/tokenizer/pretokenizer.hpp"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "model/tokenizer/utf8.hpp"

namespace conveyor::tokenizer_detail {
namespace {

using Pieces = std::vector<std::string>;

Pieces split(std::string_view name, std::string_view text) {
  auto pre = PreTokenizer::create(name);
  EXPECT_TRUE(pre) << pre.error().message;
  if (!pre) return {};
  std::vector<std::string_view> views;
  (*pre)->split(text, views);
  Pieces out;
  std::string joined;
  for (std::string_view v : views) {
    EXPECT_FALSE(v.empty()) << name;
    out.emplace_back(v);
    joined += v;
  }
  EXPECT_EQ(joined, text) << name << ": the pieces must cover the text";
  return out;
}

TEST(PreTokenizer, Gpt2WordsTakeTheirLeadingSpace) {
  EXPECT_EQ(split("gpt-2", "Hello world"), (Pieces{"Hello", " world"}));
  EXPECT_EQ(split("gpt-2", " Hello"), (Pieces{" Hello"}));
  EXPECT_EQ(split("gpt-2", ""), Pieces{});
  EXPECT_EQ(split("", "Hello world"), (Pieces{"Hello", " world"}));  // no name: GPT-2
}

TEST(PreTokenizer, Gpt2Contractions) {
  EXPECT_EQ(split("gpt-2", "I'm here's we'll they've you're he'd don't"),
            (Pieces{"I", "'m", " here", "'s", " we", "'ll", " they", "'ve", " you", "'re", " he",
                    "'d", " don", "'t"}));
  // Case-sensitive in GPT-2's pattern; a lone quote is punctuation.
  EXPECT_EQ(split("gpt-2", "I'M 'x"), (Pieces{"I", "'", "M", " '", "x"}));
}

TEST(PreTokenizer, Gpt2NumbersPunctuationAndSpaces) {
  EXPECT_EQ(split("gpt-2", "abc123 456"), (Pieces{"abc", "123", " 456"}));
  EXPECT_EQ(split("gpt-2", "x=(y+1);"), (Pieces{"x", "=(", "y", "+", "1", ");"}));
  // \s+(?!\S): the last space of a run goes with the next word.
  EXPECT_EQ(split("gpt-2", "a    b"), (Pieces{"a", "   ", " b"}));
  EXPECT_EQ(split("gpt-2", "x  \ny"), (Pieces{"x", "  ", "\n", "y"}));
  EXPECT_EQ(split("gpt-2", "end \n\n"), (Pieces{"end", " \n\n"}));
  EXPECT_EQ(split("gpt-2", "\tx"), (Pieces{"\t", "x"}));
}

TEST(PreTokenizer, Llama3) {
  // Contractions in any case, digits in threes, one leading non-letter.
  EXPECT_EQ(split("llama-bpe", "I'M HERE'S don't"),
            (Pieces{"I", "'M", " HERE", "'S", " don", "'t"}));
  EXPECT_EQ(split("llama-bpe", "1234567 x12"), (Pieces{"123", "456", "7", " x", "12"}));
  EXPECT_EQ(split("llama-bpe", "(hello) \tworld"), (Pieces{"(hello", ")", " ", "\tworld"}));
  // Punctuation keeps the line breaks after it; whitespace up to the last newline.
  EXPECT_EQ(split("llama-bpe", "end.\n\n  next"), (Pieces{"end", ".\n\n", " ", " next"}));
  EXPECT_EQ(split("llama-bpe", "a \n \n  b"), (Pieces{"a", " \n \n", " ", " b"}));
  EXPECT_EQ(split("llama3", "a  b"), (Pieces{"a", " ", " b"}));
}

TEST(PreTokenizer, Qwen2SplitsSingleDigits) {
  EXPECT_EQ(split("qwen2", "x 2024!"), (Pieces{"x", " ", "2", "0", "2", "4", "!"}));
}

TEST(PreTokenizer, ExactUnicodeClasses) {
  // Devanagari vowel signs are marks (not letters): words split at them.
  EXPECT_EQ(split("llama-bpe", "\xE0\xA4\xB9\xE0\xA4\xBF\xE0\xA4\xA8"),  // हिन
            (Pieces{"\xE0\xA4\xB9", "\xE0\xA4\xBF\xE0\xA4\xA8"}));
  // Ideographic space (U+3000) and no-break space are white space; ½ is a number.
  EXPECT_EQ(split("gpt-2", "a\xE3\x80\x80" "b"), (Pieces{"a", "\xE3\x80\x80", "b"}));
  EXPECT_EQ(split("gpt-2", "3\xC2\xBD"), (Pieces{"3\xC2\xBD"}));
  // \v and U+0085 are White_Space (as in Hugging Face and llama.cpp).
  EXPECT_EQ(split("gpt-2", "a\v\vb"), (Pieces{"a", "\v", "\v", "b"}));
  EXPECT_EQ(split("gpt-2", "a\xC2\x85\xC2\x85" "b"), (Pieces{"a", "\xC2\x85", "\xC2\x85", "b"}));
  // Emoji are symbols; a supplementary-plane letter is a letter.
  EXPECT_EQ(split("gpt-2", "hi \xF0\x9F\xA6\x99\xF0\x9F\xA6\x99"),
            (Pieces{"hi", " \xF0\x9F\xA6\x99\xF0\x9F\xA6\x99"}));
  EXPECT_EQ(split("gpt-2", " \xF0\x90\x90\x80x"), (Pieces{" \xF0\x90\x90\x80x"}));  // 𐐀
}

TEST(PreTokenizer, SequencesSplitEachPieceAgain) {
  // starcoder: every digit alone first, then GPT-2's pattern inside each piece.
  EXPECT_EQ(split("starcoder", "ab 123c"), (Pieces{"ab", " ", "1", "2", "3", "c"}));
  // falcon: punctuation runs first, then GPT-2, then three-digit groups.
  EXPECT_EQ(split("falcon", "x, 12345"), (Pieces{"x", ",", " ", "123", "45"}));
}

TEST(PreTokenizer, EveryKnownNameCompilesAndCovers) {
  const std::string text = "Hello, World! It's 2024-01-02\t\xE4\xBD\xA0\xE5\xA5\xBD  ok\r\n";
  EXPECT_GE(pretokenizer_names().size(), 40u);
  for (std::string_view name : pretokenizer_names()) EXPECT_FALSE(split(name, text).empty()) << name;
}

TEST(PreTokenizer, IllFormedBytesAreOnePieceEach) {
  const std::string text = "ab\xFF\xFE cd\xC3 \xE2\x82";
  EXPECT_EQ(split("llama-bpe", text),
            (Pieces{"ab", "\xFF", "\xFE", " cd", "\xC3", " ", "\xE2", "\x82"}));
}

TEST(PreTokenizer, UnknownNameIsRefused) {
  auto pre = PreTokenizer::create("no-such-tokenizer");
  ASSERT_FALSE(pre);
  EXPECT_EQ(pre.error().code, Errc::unsupported);
  EXPECT_NE(pre.error().message.find("'no-such-tokenizer'"), std::string::npos);
}

TEST(PreTokenizer, Qwen2NormalizesToNfc) {
  auto qwen = PreTokenizer::create("qwen2");
  auto llama = PreTokenizer::create("llama-bpe");
  ASSERT_TRUE(qwen && llama);
  std::string storage;
  const std::string decomposed = "e\xCC\x81t\xC3\xA9";  // e + U+0301, then é
  EXPECT_EQ((*qwen)->normalize(decomposed, storage), "\xC3\xA9t\xC3\xA9");
  EXPECT_EQ((*llama)->normalize(decomposed, storage), decomposed);
  // Ill-formed bytes stay where they were.
  EXPECT_EQ((*qwen)->normalize("\xFF" "e\xCC\x81\xFE", storage), "\xFF\xC3\xA9\xFE");
  EXPECT_TRUE((*llama)->ignore_merges());
  EXPECT_FALSE((*qwen)->ignore_merges());
}

// The hand-written splitters cut random text exactly where ICU running the
// expressions does; the characters are chosen around the classes' edges.
TEST(PreTokenizer, BuiltinSplittersAgreeWithTheRegexEngine) {
  const std::vector<uint32_t> alphabet = {
      'a', 'Z', 's', 'S', 't', 'r', 'e', 'v', 'm', 'l', 'L', 'd', 'D', '0', '7', ' ', ' ', ' ', '\t',
      '\r', '\n', '\v', '\f', '\'', '\'', '!', '.', '(', '_', '-', '/', '<', '|', 0xA0, 0x85, 0x3000,
      0x2028, 0x200B, 0xE9, 0x301, 0x93F, 0x939, 0x4E2D, 0x0663, 0xBD, 0x2167, 0x1C5, 0x2C6,
      0x1F600, 0x1F3FD, 0x200D, 0x10400, 0x1D400, 0x1D7CE, 0xFEFF, 0xFF11, 0x17F};
  std::mt19937 rng(1234);
  for (std::string_view name : {"gpt-2", "llama-bpe", "qwen2", "starcoder"}) {
    auto fast = PreTokenizer::create(name, true);
    auto regex = PreTokenizer::create(name, false);
    ASSERT_TRUE(fast && regex);
    for (int n = 0; n < 3000; ++n) {
      std::string text;
      const int length = int(rng() % 24);
      for (int i = 0; i < length; ++i) utf8::append_code_point(alphabet[rng() % alphabet.size()], text);
      std::vector<std::string_view> a, b;
      (*fast)->split(text, a);
      (*regex)->split(text, b);
      ASSERT_EQ(std::vector<std::string>(a.begin(), a.end()), std::vector<std::string>(b.begin(), b.end()))
          << name << " on " << ::testing::PrintToString(text);
    }
  }
}

}  // namespace
}  // namespace conveyor::tokenizer_detail
