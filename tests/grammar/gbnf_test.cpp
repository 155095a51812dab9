// GBNF to grammars: llama.cpp's syntax (the grammars it ships are of this
// shape), accept/refuse tables through earley.hpp, and the errors, which
// give the line and column.
#include "grammar/gbnf.hpp"

#include <gtest/gtest.h>

#include <vector>

#include "tests/grammar/earley.hpp"

namespace conveyor::grammar {
namespace {

using testing::earley_accepts;

Grammar compile_gbnf(std::string_view text) {
  auto g = grammar_from_gbnf(text);
  EXPECT_TRUE(g) << g.error().message;
  return g ? *g : Grammar{};
}

// llama.cpp's grammars/json.gbnf, as it ships.
constexpr const char* kJsonGbnf = R"(root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws

object ::=
  "{" ws (
            string ":" ws value
    ("," ws string ":" ws value)*
  )? "}" ws

array  ::=
  "[" ws (
            value
    ("," ws value)*
  )? "]" ws

string ::=
  "\"" (
    [^"\\\x7F\x00-\x1F] |
    "\\" (["\\bfnrt] | "u" [0-9a-fA-F]{4}) # escapes
  )* "\"" ws

number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [0-9] [1-9]{0,15})? ws

# Optional space: by convention, applied in this grammar after literal chars when allowed
ws ::= | " " | "\n" [ \t]{0,20}
)";

TEST(Gbnf, LlamaCppJsonGrammar) {
  const Grammar g = compile_gbnf(kJsonGbnf);
  for (const char* s : {R"({})", R"({"a": [1, 2.5, "x\n\u00e9"], "b": {"c": null}})", "{\n  \"k\": true\n}"}) {
    EXPECT_TRUE(earley_accepts(g, s)) << s;
  }
  for (const char* s : {R"([])", R"({"a" 1})", R"({"a": tru})", "{\"a\": \"\x01\"}"}) {
    EXPECT_FALSE(earley_accepts(g, s)) << s;
  }
}

TEST(Gbnf, ElementsAndRepetition) {
  const Grammar g = compile_gbnf(R"(
# a comment line
root ::= greeting (" " name)? "!" tail-part   # trailing comment
greeting ::= "hello" | "hi" |
    "\x48ey"
name ::= [A-Z] [a-z]{1,3}
tail-part ::= [^a-z\n]* "." [0-9]{2,} "\u00e9" x_y{,2}
x_y ::= "\[" . "\]"
)");
  for (const char* s : {"hi!.12\xC3\xA9", "hello Bob!XY.123\xC3\xA9", "Hey Ann!.00\xC3\xA9[\xE2\x82\xAC]", "hi!.99\xC3\xA9[a][b]"}) {
    EXPECT_TRUE(earley_accepts(g, s)) << s;
  }
  for (const char* s : {"hi !.12\xC3\xA9", "hello B!.12\xC3\xA9", "hello Bobby!.12\xC3\xA9", "hi!.1\xC3\xA9",
                        "hi!a.12\xC3\xA9", "hi!.12\xC3\xA9[a][b][c]"}) {
    EXPECT_FALSE(earley_accepts(g, s)) << s;
  }
}

TEST(Gbnf, RepetitionOfNullableItemsIsNotLeftRecursive) {
  const Grammar g = compile_gbnf("root ::= (\"a\"? \"b\"?)* opt+ \"c\"\nopt ::= \"x\"?\n");
  for (const char* s : {"c", "abbac", "xxc", "aac"}) EXPECT_TRUE(earley_accepts(g, s)) << s;
  for (const char* s : {"", "ca", "xcx"}) EXPECT_FALSE(earley_accepts(g, s)) << s;
}

// llama.cpp's <[id]>: the token itself, repeated and grouped like any element.
TEST(Gbnf, TokenReferencesById) {
  const Grammar g = compile_gbnf("root ::= <[7]> \"x\" (<[12]> | \"y\")* <[7]>\n");
  EXPECT_EQ(token_elements(g), (std::vector<int32_t>{7, 12}));
  const auto t = [](int32_t id) { return testing::kTokenSymbol + id; };
  const std::vector<std::vector<int32_t>> in = {{t(7), 'x', t(7)}, {t(7), 'x', t(12), 'y', t(12), t(7)}};
  const std::vector<std::vector<int32_t>> out = {{'x', t(7)}, {t(7), 'x'}, {t(7), 'x', t(13), t(7)}, {t(12), 'x', t(7)}};
  for (const auto& text : in) EXPECT_TRUE(earley_accepts(g, text));
  for (const auto& text : out) EXPECT_FALSE(earley_accepts(g, text));
  EXPECT_NE(to_string(g).find("<[7]> [x]"), std::string::npos) << to_string(g);
}

// <text>: the token whose text that is, found by the caller's lookup.
TEST(Gbnf, TokenReferencesByText) {
  const TokenLookup tokens = [](std::string_view text) { return text == "<think>" ? 40 : text == "</think>" ? 41 : -1; };
  auto g = grammar_from_gbnf("root ::= <think> [a-z]* </think> \"!\" !<think>\n", tokens);
  ASSERT_TRUE(g) << g.error().message;
  EXPECT_EQ(token_elements(*g), (std::vector<int32_t>{40, 41}));
  const auto t = [](int32_t id) { return testing::kTokenSymbol + id; };
  EXPECT_TRUE(earley_accepts(*g, std::vector<int32_t>{t(40), 'o', 'k', t(41), '!', t(41)}));
  EXPECT_TRUE(earley_accepts(*g, std::vector<int32_t>{t(40), t(41), '!', t(7)})) << "any token but <think>";
  EXPECT_FALSE(earley_accepts(*g, std::vector<int32_t>{t(40), t(41), '!', t(40)}));
  EXPECT_FALSE(earley_accepts(*g, std::vector<int32_t>{t(40), t(41), '!', 'x'})) << "bytes are not a token";
  EXPECT_FALSE(earley_accepts(*g, "<think>ok</think>!x")) << "the text is not the token";
  EXPECT_NE(to_string(*g).find("!<[40]>"), std::string::npos) << to_string(*g);
  auto unknown = grammar_from_gbnf("root ::= <tool>\n", tokens);
  ASSERT_FALSE(unknown);
  EXPECT_NE(unknown.error().message.find("'<tool>' is not one token of the vocabulary (line 1, column 10)"),
            std::string::npos)
      << unknown.error().message;
}

TEST(Gbnf, ErrorsGiveLineAndColumn) {
  const std::vector<std::pair<const char*, const char*>> cases = {
      {"root ::= foo\n", "gbnf: rule 'foo' is not defined (line 1, column 10)"},
      {"start ::= \"a\"\n", "gbnf: no rule 'root'"},
      {"root ::= \"a\"\nroot ::= \"b\"\n", "rule 'root' is defined twice (first at line 1, column 1) (line 2, column 1)"},
      {"root ::= expr\nexpr ::= term \"+\" expr | term\nterm ::= expr \"*\" | \"1\"\n",
       "rule 'expr' is left-recursive: expr -> term -> expr (line 2, column 1)"},
      {"root ::= x? root \"a\" | \"b\"\nx ::= \"x\"\n", "rule 'root' is left-recursive: root -> root (line 1, column 1)"},
      {"root ::= \"a\" root\n", "rule 'root' matches no finite text"},
      {"root ::= \"abc\n", "unterminated string literal (line 1, column 14)"},
      {"root ::= [abc", "unterminated character class (line 1, column 14)"},
      {"root ::= [z-a]\n", "range out of order"},
      {"root ::= (\"a\" \n", "expected ')'"},
      {"root := \"a\"\n", "expected '::=' after the rule name (line 1, column 6)"},
      {"root ::= * \"a\"\n", "expected something to repeat before '*' (line 1, column 10)"},
      {"root ::= \"a\"{3,1}\n", "repetition {m,n} with n < m"},
      {"root ::= \"a\"{100000}\n", "repetition count above 10000"},
      {"root ::= \"\\q\"\n", "unknown escape '\\q'"},
      {"root ::= <think>\n", "'<think>': token references by text need the vocabulary; write <[id]> (line 1, column 10)"},
      {"root ::= <think\n", "expected <text> or <[id]> (line 1, column 10)"},
      {"root ::= <[12x]>\n", "expected a token id, <[id]> (line 1, column 10)"},
      {"root ::= <[99999999999]>\n", "expected a token id, <[id]>"},
      {"root ::= <[]>\n", "expected a token id, <[id]>"},
      {"root ::= \"a\" )\n", "expected the end of the line (line 1, column 14)"},
      {"  ::= \"a\"\n", "expected a rule name (line 1, column 3)"},
  };
  const std::string deep = "root ::= " + std::string(300, '(') + "\"a\"" + std::string(300, ')') + "\n";
  for (const auto& [text, message] : cases) {
    auto g = grammar_from_gbnf(text);
    ASSERT_FALSE(g) << text;
    EXPECT_EQ(g.error().code, Errc::invalid_argument);
    EXPECT_NE(g.error().message.find(message), std::string::npos) << text << "\n" << g.error().message;
  }
  auto nested = grammar_from_gbnf(deep);
  ASSERT_FALSE(nested);
  EXPECT_NE(nested.error().message.find("groups nested more than 256 deep (line 1, column 266)"), std::string::npos)
      << nested.error().message;
}

}  // namespace
}  // namespace conveyor::grammar
