#include "model/tokenizer/utf8.hpp"

#include <gtest/gtest.h>

#include <string>

#include "tests/model/tokenizer/test_util.hpp"

namespace conveyor {
namespace {

const std::string kFffd = "\xEF\xBF\xBD";

TEST(Utf8, ValidTextPassesThrough) {
  const std::string text = "plain ascii, caf\xC3\xA9, \xE6\x97\xA5\xE6\x9C\xAC, \xF0\x9F\xA6\x99";
  EXPECT_TRUE(utf8::is_valid(text));
  EXPECT_EQ(utf8::sanitize(text), text);
}

TEST(Utf8, ReplacesEachMaximalSubpartOnce) {
  // The Unicode standard's examples (same results as Python's "replace").
  EXPECT_EQ(utf8::sanitize("\xFF"), kFffd);
  EXPECT_EQ(utf8::sanitize("a\x80z"), "a" + kFffd + "z");
  EXPECT_EQ(utf8::sanitize("\xC0\xAF"), kFffd + kFffd);             // overlong lead
  EXPECT_EQ(utf8::sanitize("\xE0\x80\xAF"), kFffd + kFffd + kFffd);  // overlong
  EXPECT_EQ(utf8::sanitize("\xED\xA0\x80"), kFffd + kFffd + kFffd);  // surrogate
  EXPECT_EQ(utf8::sanitize("\xF4\x90\x80\x80"), kFffd + kFffd + kFffd + kFffd);  // > U+10FFFF
  EXPECT_EQ(utf8::sanitize("\xF0\x9F\xA6"), kFffd);                   // truncated at the end
  EXPECT_EQ(utf8::sanitize("\xF0\x9F(x"), kFffd + "(x");              // cut by a bad byte
  EXPECT_EQ(utf8::sanitize("\xE2\x28\xA1"), kFffd + "(" + kFffd);
}

TEST(Utf8, NonFinalScanHoldsOnlyAnIncompleteTail) {
  std::string out;
  EXPECT_EQ(utf8::append_valid("ab\xF0\x9F\xA6", false, out), 2u);
  EXPECT_EQ(out, "ab");
  out.clear();
  // An invalid byte is replaced at once, even when not final.
  EXPECT_EQ(utf8::append_valid("\xFF\xE2\x82", false, out), 1u);
  EXPECT_EQ(out, kFffd);
}

TEST(Utf8, CharLengthAndDecode) {
  const std::string s = "a\xC3\xA9\xE2\x96\x81\xF0\x9F\xA6\x99";
  EXPECT_EQ(utf8::char_length(s, 0), 1u);
  EXPECT_EQ(utf8::char_length(s, 1), 2u);
  EXPECT_EQ(utf8::char_length(s, 2), 0u);  // a continuation byte
  EXPECT_EQ(utf8::decode_char(s, 3, 3), 0x2581u);
  EXPECT_EQ(utf8::decode_char(s, 6, 4), 0x1F999u);
  EXPECT_EQ(utf8::char_length(s, s.size()), 0u);
  EXPECT_EQ(utf8::char_length("\xF0\x9F", 0), 0u);
}

TEST(Utf8, EncodesCodePoints) {
  for (uint32_t cp : {0x24u, 0xA2u, 0x20ACu, 0x10348u, 0x10FFFFu}) {
    std::string s;
    utf8::append_code_point(cp, s);
    ASSERT_TRUE(test::valid_utf8(s)) << cp;
    ASSERT_EQ(utf8::decode_char(s, 0, s.size()), cp);
  }
}

TEST(Utf8, SanitizeAlwaysYieldsValidText) {
  uint32_t state = 12345;
  for (int round = 0; round < 2000; ++round) {
    std::string s;
    for (int i = 0; i < 16; ++i) {
      state = state * 1664525u + 1013904223u;
      s.push_back(static_cast<char>(state >> 24));
    }
    const std::string clean = utf8::sanitize(s);
    ASSERT_TRUE(test::valid_utf8(clean));
    ASSERT_EQ(utf8::is_valid(s), test::valid_utf8(s));
  }
}

}  // namespace
}  // namespace conveyor
