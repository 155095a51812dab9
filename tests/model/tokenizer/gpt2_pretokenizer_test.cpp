#include "model/tokenizer/gpt2_pretokenizer.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "model/tokenizer/unicode_class.hpp"

namespace conveyor::tokenizer_detail {
namespace {

std::vector<std::string> split(std::string_view text) {
  std::vector<std::string> out;
  for (std::string_view piece : gpt2_pretokenize(text)) out.emplace_back(piece);
  return out;
}

using Pieces = std::vector<std::string>;

TEST(Gpt2Pretokenizer, WordsTakeTheirLeadingSpace) {
  EXPECT_EQ(split("Hello world"), (Pieces{"Hello", " world"}));
  EXPECT_EQ(split(" Hello"), (Pieces{" Hello"}));
  EXPECT_EQ(split(""), Pieces{});
}

TEST(Gpt2Pretokenizer, Contractions) {
  EXPECT_EQ(split("I'm here's we'll they've you're he'd don't"),
            (Pieces{"I", "'m", " here", "'s", " we", "'ll", " they", "'ve", " you", "'re", " he",
                    "'d", " don", "'t"}));
  // Case-sensitive like GPT-2's pattern; a lone quote is punctuation.
  EXPECT_EQ(split("I'M 'x"), (Pieces{"I", "'", "M", " '", "x"}));
}

TEST(Gpt2Pretokenizer, NumbersAndPunctuation) {
  EXPECT_EQ(split("abc123 456"), (Pieces{"abc", "123", " 456"}));
  EXPECT_EQ(split("hello!!! ?"), (Pieces{"hello", "!!!", " ?"}));
  EXPECT_EQ(split("x=(y+1);"), (Pieces{"x", "=(", "y", "+", "1", ");"}));
}

TEST(Gpt2Pretokenizer, WhitespaceRuns) {
  // \s+(?!\S): the last space of a run goes with the next word.
  EXPECT_EQ(split("a  b"), (Pieces{"a", " ", " b"}));
  EXPECT_EQ(split("a    b"), (Pieces{"a", "   ", " b"}));
  EXPECT_EQ(split("x  \ny"), (Pieces{"x", "  ", "\n", "y"}));
  EXPECT_EQ(split("end \n\n"), (Pieces{"end", " \n\n"}));
  EXPECT_EQ(split("\tx"), (Pieces{"\t", "x"}));
}

TEST(Gpt2Pretokenizer, NonAsciiClasses) {
  EXPECT_EQ(split("caf\xC3\xA9 \xE6\x97\xA5\xE6\x9C\xAC"),
            (Pieces{"caf\xC3\xA9", " \xE6\x97\xA5\xE6\x9C\xAC"}));
  EXPECT_EQ(split("3\xC2\xBD"), (Pieces{"3\xC2\xBD"}));              // ½ is a number
  EXPECT_EQ(split("a\xE2\x80\x94" "b"), (Pieces{"a", "\xE2\x80\x94", "b"}));  // em dash
  EXPECT_EQ(split("hi \xF0\x9F\xA6\x99\xF0\x9F\xA6\x99"),
            (Pieces{"hi", " \xF0\x9F\xA6\x99\xF0\x9F\xA6\x99"}));   // emoji are symbols
  EXPECT_EQ(split("a\xE3\x80\x80" "b"), (Pieces{"a", "\xE3\x80\x80", "b"}));  // ideographic space
}

TEST(Gpt2Pretokenizer, CoversEveryByteOfInvalidInput) {
  const std::string text = "ab\xFF\xFE cd\xC3 \xE2\x82";
  std::string joined;
  for (std::string_view piece : gpt2_pretokenize(text)) {
    ASSERT_FALSE(piece.empty());
    joined += piece;
  }
  EXPECT_EQ(joined, text);
}

TEST(UnicodeClass, ClassifiesCommonCharacters) {
  EXPECT_TRUE(class_table_is_sorted());
  EXPECT_EQ(classify('a'), CharClass::letter);
  EXPECT_EQ(classify('7'), CharClass::number);
  EXPECT_EQ(classify('\n'), CharClass::whitespace);
  EXPECT_EQ(classify('_'), CharClass::other);
  EXPECT_EQ(classify(0xE9), CharClass::letter);     // é
  EXPECT_EQ(classify(0xD7), CharClass::other);      // ×
  EXPECT_EQ(classify(0x3B1), CharClass::letter);    // α
  EXPECT_EQ(classify(0x416), CharClass::letter);    // Ж
  EXPECT_EQ(classify(0x4E2D), CharClass::letter);   // 中
  EXPECT_EQ(classify(0x0663), CharClass::number);   // Arabic-Indic three
  EXPECT_EQ(classify(0xFF15), CharClass::number);   // fullwidth five
  EXPECT_EQ(classify(0x3002), CharClass::other);    // 。
  EXPECT_EQ(classify(0x00A0), CharClass::whitespace);
  EXPECT_EQ(classify(0x1F600), CharClass::other);   // 😀
  EXPECT_EQ(classify(0x0301), CharClass::other);    // combining acute accent
}

}  // namespace
}  // namespace conveyor::tokenizer_detail
