// Regular expressions to grammars: tables of patterns with strings each must
// accept and refuse (run through earley.hpp), the JSON-string form, search
// anchoring, and the refusals, whose messages name the feature.
#include "grammar/regex.hpp"

#include <gtest/gtest.h>

#include "tests/grammar/earley.hpp"

namespace conveyor::grammar {
namespace {

using testing::earley_accepts;

struct Case {
  const char* pattern;
  std::vector<std::string> accept, refuse;
};

TEST(Regex, AcceptsAndRefusesWholeStrings) {
  const std::vector<Case> cases = {
      {"abc", {"abc"}, {"", "ab", "abcd", "xabc"}},
      {"a|bc|", {"a", "bc", ""}, {"b", "abc"}},
      {"colou?r", {"color", "colour"}, {"colouur"}},
      {"a*b+", {"b", "aab", "abbb"}, {"", "a", "ba"}},
      {"(ab){2}", {"abab"}, {"ab", "ababab"}},
      {"(?:ab){1,}c", {"abc", "ababc"}, {"c"}},
      {"x{2,3}", {"xx", "xxx"}, {"x", "xxxx"}},
      {"x{0,2}?y", {"y", "xy", "xxy"}, {"xxxy"}},  // lazy: the same language
      {"\\d{3}-\\d{4}", {"555-1234"}, {"555-123", "55a-1234"}},
      {"[a-c][^a-c]", {"ad", "c\xC3\xA9"}, {"aa", "a"}},
      {"\\w+\\s\\W", {"foo_1 !", "a\t-"}, {"foo!", "a  b"}},
      {"[\\d.]+", {"3.14", "..."}, {"3,14"}},
      {"a.c", {"abc", "a\xE2\x82\xAC" "c"}, {"a\nc", "ac"}},
      {"\\u00e9\\x41", {"\xC3\xA9" "A"}, {"eA"}},
      {"\\uD83D\\uDE00", {"\xF0\x9F\x98\x80"}, {"\xED\xA0\xBD"}},
      {"[]", {}, {"", "a"}},
      {"[^]", {"a", "\n"}, {""}},
      {"a{,2}", {"a{,2}"}, {"aa"}},  // not a quantifier: literal braces
      {"(a?)*b", {"b", "ab", "aab"}, {"a"}},  // a nullable item under *
      {"((a|)b?)+c", {"c", "ac", "abc", "abbac"}, {"ab", "ca"}},
      {"^(a|b)$", {"a", "b"}, {"ab", ""}},
      {"[\\b]", {"\b"}, {"b"}},
      {"\\/\\.\\*", {"/.*"}, {"/a*"}},
      {"(?<year>\\d{4})", {"2024"}, {"202"}},
  };
  for (const Case& c : cases) {
    auto g = grammar_from_regex(c.pattern);
    ASSERT_TRUE(g) << c.pattern << ": " << g.error().message;
    for (const std::string& s : c.accept) EXPECT_TRUE(earley_accepts(*g, s)) << c.pattern << " should accept " << s;
    for (const std::string& s : c.refuse) EXPECT_FALSE(earley_accepts(*g, s)) << c.pattern << " should refuse " << s;
  }
}

TEST(Regex, RefusesUnsupportedFeaturesByName) {
  const std::vector<std::pair<const char*, const char*>> cases = {
      {"(a)\\1", "backreferences are not supported at offset 4"},
      {"(?<n>a)\\k<n>", "backreferences"},
      {"a(?=b)", "lookaround"},
      {"(?<!x)a", "lookaround"},
      {"\\bword", "word boundary \\b"},
      {"\\p{L}", "Unicode property escapes"},
      {"(?i)abc", "inline flags"},
      {"a^b", "anchor '^' inside the pattern"},
      {"a$b", "anchor '$' inside the pattern"},
      {"(a$)", "anchor '$' inside the pattern"},
      {"*a", "nothing to repeat at offset 0"},
      {"a**", "nothing to repeat"},
      {"a{3,2}", "m < n"},
      {"a{20000}", "repetition count above 10000"},
      {"(ab", "missing ')'"},
      {"ab)", "unmatched ')'"},
      {"[ab", "missing ']'"},
      {"[z-a]", "range out of order"},
      {"\\q", "unknown escape \\q"},
      {"\\x4", "incomplete hex escape"},
      {"\\uD800", "lone surrogate"},
      {"abc\\", "pattern ends with '\\'"},
      {"\xFF", "invalid UTF-8"},
  };
  for (const auto& [pattern, message] : cases) {
    auto g = grammar_from_regex(pattern);
    ASSERT_FALSE(g) << pattern;
    EXPECT_EQ(g.error().code, Errc::invalid_argument);
    EXPECT_NE(g.error().message.find(message), std::string::npos) << pattern << ": " << g.error().message;
    EXPECT_EQ(g.error().message.rfind("regex: ", 0), 0u) << g.error().message;
  }
}

Grammar regex_grammar(std::string_view pattern, const RegexOptions& options) {
  GrammarBuilder b;
  const int32_t root = b.add_rule("root");
  auto e = add_regex(b, pattern, options);
  EXPECT_TRUE(e) << e.error().message;
  b.add_alternative(root, {*e});
  auto g = std::move(b).build(root);
  EXPECT_TRUE(g) << g.error().message;
  return *g;
}

TEST(Regex, SearchAnchoringMatchesAnywhereUnlessAnchored) {
  const RegexOptions search{RegexOptions::Anchoring::search, TextForm::raw};
  const Grammar free = regex_grammar("ab+", search);
  EXPECT_TRUE(earley_accepts(free, "ab"));
  EXPECT_TRUE(earley_accepts(free, "x\nabbby"));
  EXPECT_FALSE(earley_accepts(free, "a b"));
  const Grammar start = regex_grammar("^ab|cd$", search);
  EXPECT_TRUE(earley_accepts(start, "abzz"));
  EXPECT_FALSE(earley_accepts(start, "zab"));
  EXPECT_TRUE(earley_accepts(start, "zzcd"));
  EXPECT_FALSE(earley_accepts(start, "cdz"));
}

TEST(Regex, JsonStringFormEscapesWhatJsonMust) {
  const RegexOptions json{RegexOptions::Anchoring::whole_string, TextForm::json_string};
  const Grammar quote = regex_grammar("a\"b\\\\c", json);  // a"b\c
  EXPECT_TRUE(earley_accepts(quote, "a\\\"b\\\\c"));
  EXPECT_FALSE(earley_accepts(quote, "a\"b\\c"));
  const Grammar any = regex_grammar("[^x]", json);
  EXPECT_TRUE(earley_accepts(any, "\\n"));
  EXPECT_TRUE(earley_accepts(any, "\\u001F"));
  EXPECT_TRUE(earley_accepts(any, "\\u001f"));
  EXPECT_TRUE(earley_accepts(any, "/"));
  EXPECT_TRUE(earley_accepts(any, "\\/"));
  EXPECT_FALSE(earley_accepts(any, "\n"));
  EXPECT_FALSE(earley_accepts(any, "\""));
  EXPECT_FALSE(earley_accepts(any, "x"));
  const Grammar tab = regex_grammar("\\t\\x01", json);
  EXPECT_TRUE(earley_accepts(tab, "\\t\\u0001"));
  EXPECT_FALSE(earley_accepts(tab, "\\t\\u0002"));
}

TEST(Regex, DeepNestingAndLongOptionalGroupsAreBounded) {
  auto deep = grammar_from_regex(std::string(100000, '(') + "a" + std::string(100000, ')'));
  ASSERT_FALSE(deep);
  EXPECT_NE(deep.error().message.find("groups nested more than 256 deep"), std::string::npos) << deep.error().message;
  // A repeated group of many optional items: its non-empty part grows linearly.
  const auto optional_items = [](int n) {
    std::string p = "(";
    for (int i = 0; i < n; ++i) p += "a?";
    return p + ")*b";
  };
  auto big = grammar_from_regex(optional_items(5000));
  ASSERT_TRUE(big) << big.error().message;
  EXPECT_LT(big->rules.size(), 20000u);
  auto small = grammar_from_regex(optional_items(20));
  ASSERT_TRUE(small) << small.error().message;
  EXPECT_TRUE(earley_accepts(*small, "aaab"));
  EXPECT_TRUE(earley_accepts(*small, std::string(45, 'a') + "b"));
  EXPECT_FALSE(earley_accepts(*small, "aaa"));
}

TEST(Regex, CountsStayWithinTheRuleBudget) {
  std::string pattern;
  for (int i = 0; i < 100; ++i) pattern += "a{0,10000}";  // a rule per count: a million
  auto g = grammar_from_regex(pattern);
  ASSERT_FALSE(g);
  EXPECT_NE(g.error().message.find("more than"), std::string::npos) << g.error().message;
}

}  // namespace
}  // namespace conveyor::grammar
