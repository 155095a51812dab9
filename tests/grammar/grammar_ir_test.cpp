// The grammar IR's builder: UTF-8 lowering of code point classes, repetition
// rules, and check()'s refusals. The matcher's own tests run these grammars
// over bytes; here the structure is checked directly.
#include "grammar/grammar.hpp"

#include <gtest/gtest.h>

#include <functional>

namespace conveyor::grammar {
namespace {

// Whether `text` matches `e` of `g` completely (a tiny backtracking
// recognizer, fine for the short strings here; the real matcher is
// grammar/matcher.hpp).
bool matches(const Grammar& g, const Alternative& seq, std::string_view text) {
  std::function<bool(size_t, size_t, std::string_view)> go = [&](size_t i, size_t depth,
                                                                std::string_view rest) -> bool {
    if (depth > 64) return false;
    if (i == seq.size()) return rest.empty();
    const Element& e = seq[i];
    if (e.kind == Element::Kind::bytes) {
      return !rest.empty() && g.byte_sets[size_t(e.index)].test(uint8_t(rest[0])) &&
             go(i + 1, depth, rest.substr(1));
    }
    for (const Alternative& alt : g.rules[size_t(e.index)].alternatives) {
      Alternative joined = alt;
      joined.insert(joined.end(), seq.begin() + long(i) + 1, seq.end());
      if (matches(g, joined, rest)) return true;
    }
    return false;
  };
  return go(0, 0, text);
}

TEST(GrammarBuilder, CodepointClassLowersToUtf8) {
  GrammarBuilder b;
  const int32_t root = b.add_rule("root");
  b.add_alternative(root, {b.codepoints({{'a', 'z'}, {0xE9, 0xE9}, {0x4E00, 0x9FFF}, {0x1F600, 0x1F64F}})});
  auto g = std::move(b).build(root);
  ASSERT_TRUE(g) << g.error().message;
  const Alternative top{Element{Element::Kind::rule, g->root}};
  EXPECT_TRUE(matches(*g, top, "q"));
  EXPECT_TRUE(matches(*g, top, "\xC3\xA9"));        // é
  EXPECT_TRUE(matches(*g, top, "\xE4\xB8\x80"));    // U+4E00
  EXPECT_TRUE(matches(*g, top, "\xE9\xBF\xBF"));    // U+9FFF
  EXPECT_TRUE(matches(*g, top, "\xF0\x9F\x98\x80"));  // U+1F600
  EXPECT_FALSE(matches(*g, top, "A"));
  EXPECT_FALSE(matches(*g, top, "\xC3\xA8"));       // è
  EXPECT_FALSE(matches(*g, top, "\xEA\x80\x80"));   // U+A000
}

TEST(GrammarBuilder, NegatedClassExcludesSurrogatesAndMembers) {
  GrammarBuilder b;
  const int32_t root = b.add_rule("root");
  b.add_alternative(root, {b.codepoints({{'"', '"'}, {'\\', '\\'}, {0, 0x1F}}, true)});
  auto g = std::move(b).build(root);
  ASSERT_TRUE(g) << g.error().message;
  const Alternative top{Element{Element::Kind::rule, g->root}};
  EXPECT_TRUE(matches(*g, top, "a"));
  EXPECT_TRUE(matches(*g, top, "\xF4\x8F\xBF\xBF"));  // U+10FFFF
  EXPECT_TRUE(matches(*g, top, "\xEE\x80\x80"));      // U+E000
  EXPECT_FALSE(matches(*g, top, "\""));
  EXPECT_FALSE(matches(*g, top, "\n"));
  EXPECT_FALSE(matches(*g, top, "\xED\xA0\x80"));     // a surrogate, U+D800
  EXPECT_FALSE(matches(*g, top, "\xC0\x80"));         // overlong
}

TEST(GrammarBuilder, RepeatCountsExactly) {
  GrammarBuilder b;
  const int32_t root = b.add_rule("root");
  b.add_alternative(root, {b.repeat(b.literal("ab"), 2, 4)});
  auto g = std::move(b).build(root);
  ASSERT_TRUE(g) << g.error().message;
  const Alternative top{Element{Element::Kind::rule, g->root}};
  EXPECT_FALSE(matches(*g, top, "ab"));
  EXPECT_TRUE(matches(*g, top, "abab"));
  EXPECT_TRUE(matches(*g, top, "ababab"));
  EXPECT_TRUE(matches(*g, top, "abababab"));
  EXPECT_FALSE(matches(*g, top, "ababababab"));
  EXPECT_FALSE(matches(*g, top, "aba"));
}

TEST(GrammarBuilder, StarPlusOptional) {
  GrammarBuilder b;
  const int32_t root = b.add_rule("root");
  b.add_alternative(root, {b.star(b.literal("x")), b.plus(b.literal("y")), b.optional(b.literal("z"))});
  auto g = std::move(b).build(root);
  ASSERT_TRUE(g) << g.error().message;
  const Alternative top{Element{Element::Kind::rule, g->root}};
  EXPECT_TRUE(matches(*g, top, "y"));
  EXPECT_TRUE(matches(*g, top, "xxyyz"));
  EXPECT_FALSE(matches(*g, top, "xz"));
  EXPECT_FALSE(matches(*g, top, "yzz"));
}

TEST(GrammarCheck, RefusesLeftRecursionNamingTheRule) {
  GrammarBuilder b;
  const int32_t root = b.add_rule("root");
  const int32_t expr = b.add_rule("expr");
  const int32_t blank = b.add_rule("blank");
  b.add_alternative(blank, {});
  b.add_alternative(root, {b.rule_ref(expr)});
  b.add_alternative(expr, {b.rule_ref(blank), b.rule_ref(expr), b.byte('+')});
  b.add_alternative(expr, {b.byte('1')});
  auto g = std::move(b).build(root);
  ASSERT_FALSE(g);
  EXPECT_NE(g.error().message.find("'expr' is left-recursive"), std::string::npos) << g.error().message;
}

TEST(GrammarCheck, RefusesARuleWithoutAlternatives) {
  GrammarBuilder b;
  const int32_t root = b.add_rule("root");
  const int32_t empty = b.add_rule("nothing");
  b.add_alternative(root, {b.rule_ref(empty)});
  auto g = std::move(b).build(root);
  ASSERT_FALSE(g);
  EXPECT_NE(g.error().message.find("'nothing' has no alternative"), std::string::npos);
}

TEST(GrammarBuilder, NamesAreUniqueAndDumpReadable) {
  GrammarBuilder b;
  const int32_t a = b.add_rule("item");
  const int32_t c = b.add_rule("item");
  EXPECT_NE(a, c);
  EXPECT_EQ(b.find_rule("item"), a);
  EXPECT_EQ(b.find_rule("item_1"), c);
  b.add_alternative(a, b.literal("hi"));
  b.add_alternative(c, {b.rule_ref(a)});
  auto g = std::move(b).build(c);
  ASSERT_TRUE(g);
  EXPECT_EQ(to_string(*g), "item ::= [h] [i]\nitem_1 (root) ::= item\n");
}

}  // namespace
}  // namespace conveyor::grammar
