// The matcher over hand-built grammars: bytes accepted and refused, UTF-8,
// repetition, ambiguity, deep recursion, rollback, ends and termination,
// forced bytes. Masks against brute force are in token_mask_test.cpp.
#include "grammar/matcher.hpp"

#include <gtest/gtest.h>

#include <random>
#include <string>

#include "grammar/pda.hpp"
#include "tests/grammar/mask_oracle.hpp"

namespace conveyor::grammar {
namespace {

using testing::allowed_tokens;
using testing::mask_of;

// Tokens: 0 is the end token, 1 a control token, then single bytes and a few words.
std::shared_ptr<const TokenIndex> toy_vocabulary() {
  VocabularyBytes v;
  v.tokens = {"", "", "a", "b", "c", "ab", "abc", "{", "}", "\"", "x", "\xC3", "\xA9", "\xC3\xA9", " ", "1"};
  v.end_ids = {0};
  return index_vocabulary(std::move(v));
}

std::shared_ptr<const CompiledGrammar> compiled(Expected<Grammar> g,
                                                std::shared_ptr<const TokenIndex> vocab = toy_vocabulary()) {
  EXPECT_TRUE(g) << g.error().message;
  auto c = compile(std::move(*g), std::move(vocab));
  EXPECT_TRUE(c) << c.error().message;
  return *c;
}

Expected<Grammar> literal_grammar(std::string_view text) {
  GrammarBuilder b;
  const int32_t root = b.add_rule("root");
  b.add_alternative(root, b.literal(text));
  return std::move(b).build(root);
}

TEST(Matcher, AcceptsALiteralAndRefusesOtherBytes) {
  Matcher m(compiled(literal_grammar("hello")));
  EXPECT_FALSE(m.accept_bytes("help"));
  EXPECT_EQ(m.accepted_steps(), 0);  // all or nothing
  EXPECT_TRUE(m.accept_bytes("hel"));
  EXPECT_FALSE(m.can_end());
  EXPECT_TRUE(m.accept_bytes("lo"));
  EXPECT_TRUE(m.can_end());
  EXPECT_FALSE(m.accept_bytes("!"));
}

TEST(Matcher, RefusesControlTokensAndIdsOutOfRange) {
  Matcher m(compiled(literal_grammar("a")));
  EXPECT_FALSE(m.accept_token(1));
  EXPECT_FALSE(m.accept_token(-1));
  EXPECT_FALSE(m.accept_token(m.vocab_size()));
  EXPECT_FALSE(m.accept_token(0)) << "the end token before the root is complete";
  EXPECT_TRUE(m.accept_token(2));
}

TEST(Matcher, Utf8CharacterSplitAcrossTokens) {
  GrammarBuilder b;
  const int32_t root = b.add_rule("root");
  b.add_alternative(root, {b.plus({b.codepoints({{0xE9, 0xE9}, {'a', 'a'}})})});
  Matcher m(compiled(std::move(b).build(root)));
  EXPECT_FALSE(m.accept_token(12));  // a continuation byte first
  EXPECT_TRUE(m.accept_token(11));   // \xC3
  EXPECT_FALSE(m.can_end()) << "inside a character";
  EXPECT_EQ(allowed_tokens(mask_of(m)), std::vector<int32_t>{12});
  EXPECT_TRUE(m.accept_token(12));   // \xA9: é complete
  EXPECT_TRUE(m.can_end());
  EXPECT_TRUE(m.accept_token(13));   // é in one token
  EXPECT_TRUE(m.accept_token(2));
  EXPECT_FALSE(m.accept_bytes("\xC3\xA8"));  // è
}

TEST(Matcher, RepeatCountsBytes) {
  GrammarBuilder b;
  const int32_t root = b.add_rule("root");
  Alternative alt{b.repeat(b.literal("a"), 2, 3), b.plus(b.literal("b")), b.star(b.literal("c"))};
  b.add_alternative(root, alt);
  const auto g = compiled(std::move(b).build(root));
  for (const auto& [text, ok] : std::vector<std::pair<std::string, bool>>{
           {"aab", true}, {"aaabbbccc", true}, {"ab", false}, {"aaaab", false}, {"aa", false}, {"aabcb", false}}) {
    Matcher m(g);
    EXPECT_EQ(m.accept_bytes(text) && m.can_end(), ok) << text;
  }
}

TEST(Matcher, AmbiguousAlternativesAreFollowedTogether) {
  // root ::= "a"* "ab" | "a" "a"* "c": after "aa" both parses are alive.
  GrammarBuilder b;
  const int32_t root = b.add_rule("root");
  Alternative first{b.star(b.literal("a"))};
  for (const Element& e : b.literal("ab")) first.push_back(e);
  b.add_alternative(root, first);
  b.add_alternative(root, {b.byte('a'), b.star(b.literal("a")), b.byte('c')});
  const auto g = compiled(std::move(b).build(root));
  Matcher m(g);
  ASSERT_TRUE(m.accept_bytes("aa"));
  EXPECT_EQ(allowed_tokens(mask_of(m)), (std::vector<int32_t>{2, 3, 4, 5}));  // a, b, c, ab
  Matcher c = m;
  EXPECT_TRUE(m.accept_bytes("b"));
  EXPECT_TRUE(m.can_end());
  EXPECT_TRUE(c.accept_bytes("ac"));
  EXPECT_TRUE(c.can_end());
}

TEST(Matcher, LongStringRunsInConstantStackDepth) {
  // A star is right-recursive: 100k bytes must not grow the stacks.
  GrammarBuilder b;
  const int32_t root = b.add_rule("root");
  Alternative alt = b.literal("\"");
  alt.push_back(b.star({b.codepoints({{'"', '"'}, {'\\', '\\'}}, true)}));
  alt.push_back(b.byte('"'));
  b.add_alternative(root, alt);
  Matcher m(compiled(std::move(b).build(root)));
  ASSERT_TRUE(m.accept_bytes("\""));
  const size_t before = m.memory_bytes();
  std::string chunk;
  for (int i = 0; i < 100; ++i) chunk += "abc \xC3\xA9\xE4\xB8\x80 ";  // 10 bytes, three scripts
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(m.accept_bytes(chunk));
  EXPECT_LT(m.memory_bytes(), before + 64 * 1024) << "stacks grew with the string";
  EXPECT_FALSE(m.can_end());
  EXPECT_TRUE(m.accept_bytes("\""));
  EXPECT_TRUE(m.can_end());
}

TEST(Matcher, DeepNestingIsNotRecursionInTheMatcher) {
  // root ::= "{" root "}" | "x": 20000 levels deep, each a stack node.
  GrammarBuilder b;
  const int32_t root = b.add_rule("root");
  b.add_alternative(root, {b.byte('{'), b.rule_ref(root), b.byte('}')});
  b.add_alternative(root, b.literal("x"));
  Matcher m(compiled(std::move(b).build(root)));
  const std::string depth(20000, '{');
  ASSERT_TRUE(m.accept_bytes(depth));
  ASSERT_TRUE(m.accept_bytes("x"));
  EXPECT_EQ(m.forced_bytes(100000), std::string(20000, '}'));
  ASSERT_TRUE(m.accept_bytes(std::string(20000, '}')));
  EXPECT_TRUE(m.can_end());
}

TEST(Matcher, RollbackRestoresEarlierStates) {
  Matcher m(compiled(literal_grammar("abcab")));
  const auto start = mask_of(m);
  ASSERT_TRUE(m.accept_token(6));  // abc
  const auto after_abc = mask_of(m);
  ASSERT_TRUE(m.accept_token(2));  // a
  ASSERT_TRUE(m.accept_token(3));  // b
  ASSERT_TRUE(m.accept_token(0));  // end
  EXPECT_TRUE(m.is_terminated());
  EXPECT_EQ(m.accepted_steps(), 4);
  m.rollback(3);
  EXPECT_FALSE(m.is_terminated());
  EXPECT_EQ(mask_of(m), after_abc);
  EXPECT_TRUE(m.accept_token(5));  // ab
  EXPECT_TRUE(m.can_end());
  m.reset();
  EXPECT_EQ(mask_of(m), start);
  EXPECT_EQ(m.accepted_steps(), 0);
}

TEST(Matcher, EndTokenOnlyWhenCompleteThenTerminated) {
  GrammarBuilder b;
  const int32_t root = b.add_rule("root");
  b.add_alternative(root, {b.byte('a'), b.optional(b.literal("b"))});
  Matcher m(compiled(std::move(b).build(root)));
  EXPECT_EQ(allowed_tokens(mask_of(m)), (std::vector<int32_t>{2, 5}));  // a, ab
  ASSERT_TRUE(m.accept_token(2));
  EXPECT_EQ(allowed_tokens(mask_of(m)), (std::vector<int32_t>{0, 3}));  // end, b
  ASSERT_TRUE(m.accept_token(3));
  EXPECT_EQ(allowed_tokens(mask_of(m)), std::vector<int32_t>{0}) << "complete: only the end";
  ASSERT_TRUE(m.accept_token(0));
  EXPECT_TRUE(m.is_terminated());
  EXPECT_FALSE(m.can_end());
  EXPECT_TRUE(allowed_tokens(mask_of(m)).empty());
  EXPECT_FALSE(m.accept_token(2));
  EXPECT_FALSE(m.accept_token(0));
}

TEST(Matcher, ForcedBytesUpToAChoice) {
  // {"name": "<string>", "age": <digits>} with fixed spacing.
  GrammarBuilder b;
  const int32_t root = b.add_rule("root");
  Alternative alt = b.literal("{\"name\": \"");
  alt.push_back(b.star({b.codepoints({{'"', '"'}}, true)}));
  for (const Element& e : b.literal("\", \"age\": ")) alt.push_back(e);
  alt.push_back(b.plus({b.codepoints({{'0', '9'}})}));
  alt.push_back(b.byte('}'));
  b.add_alternative(root, alt);
  Matcher m(compiled(std::move(b).build(root)));
  EXPECT_EQ(m.forced_bytes(), "{\"name\": \"");
  ASSERT_TRUE(m.accept_bytes("{"));
  EXPECT_EQ(m.forced_bytes(), "\"name\": \"");
  ASSERT_TRUE(m.accept_bytes("\"name\": \"Bo"));
  EXPECT_EQ(m.forced_bytes(), "");
  ASSERT_TRUE(m.accept_bytes("\""));
  EXPECT_EQ(m.forced_bytes(), ", \"age\": ");
  EXPECT_EQ(m.forced_bytes(3), ", \"");
  ASSERT_TRUE(m.accept_bytes(", \"age\": 4"));
  EXPECT_EQ(m.forced_bytes(), "");
  ASSERT_TRUE(m.accept_bytes("}"));
  EXPECT_EQ(m.forced_bytes(), "") << "complete: the end is a choice";
  EXPECT_EQ(m.accepted_steps(), 5) << "forced_bytes changes nothing";
}

// A structural tag opened by control token 1: free text, then "ab" and the end.
Expected<Grammar> triggered_grammar(int32_t trigger) {
  auto g = literal_grammar("ab");
  if (g) g->trigger_token = trigger;
  return g;
}

TEST(Matcher, FreeTextUntilTheTriggerTokenThenTheRules) {
  Matcher m(compiled(triggered_grammar(1)));
  std::vector<int32_t> every(size_t(m.vocab_size()));
  for (int32_t i = 0; i < m.vocab_size(); ++i) every[size_t(i)] = i;
  ASSERT_TRUE(m.is_dormant());
  EXPECT_EQ(allowed_tokens(mask_of(m)), every) << "free text: the end and control tokens included";
  EXPECT_TRUE(m.can_end());
  EXPECT_EQ(m.forced_bytes(), "");
  EXPECT_TRUE(m.accept_token(10));  // x
  EXPECT_TRUE(m.accept_token(8));   // }: any text
  EXPECT_TRUE(m.accept_bytes("anything"));
  EXPECT_TRUE(m.is_dormant());
  ASSERT_TRUE(m.accept_token(1));   // the trigger
  EXPECT_FALSE(m.is_dormant());
  EXPECT_FALSE(m.can_end());
  EXPECT_EQ(m.forced_bytes(), "ab");
  EXPECT_EQ(allowed_tokens(mask_of(m)), (std::vector<int32_t>{2, 5}));  // a, ab
  EXPECT_FALSE(m.accept_token(1)) << "the trigger is a control token: not text of the rules";
  EXPECT_FALSE(m.accept_token(10));
  ASSERT_TRUE(m.accept_token(5));   // ab
  EXPECT_EQ(allowed_tokens(mask_of(m)), std::vector<int32_t>{0});
  ASSERT_TRUE(m.accept_token(0));
  EXPECT_TRUE(m.is_terminated());
  EXPECT_EQ(m.accepted_steps(), 6);
  m.rollback(3);  // back before the trigger
  EXPECT_TRUE(m.is_dormant());
  EXPECT_EQ(allowed_tokens(mask_of(m)), every);
  EXPECT_TRUE(m.accept_token(0)) << "free text may end";
  EXPECT_TRUE(m.is_terminated());
}

TEST(Compile, ATriggerMustBeAControlTokenOfTheVocabulary) {
  EXPECT_TRUE(compile(*triggered_grammar(1), toy_vocabulary()));
  for (int32_t bad : {0, 2, 16}) {  // the end token, a text token, out of range
    auto c = compile(*triggered_grammar(bad), toy_vocabulary());
    ASSERT_FALSE(c) << bad;
    EXPECT_NE(c.error().message.find("not a control token"), std::string::npos) << c.error().message;
  }
  auto negative = compile(*triggered_grammar(-2), toy_vocabulary());
  ASSERT_FALSE(negative);
  EXPECT_NE(negative.error().message.find("negative"), std::string::npos);
}

// root ::= "a" <[1]> "bc" | "ab": control token 1 in the middle of the text.
Expected<Grammar> token_grammar(int32_t token) {
  GrammarBuilder b;
  const int32_t root = b.add_rule("root");
  Alternative call = b.literal("a");
  call.push_back(b.token(token));
  const Alternative tail = b.literal("bc");
  call.insert(call.end(), tail.begin(), tail.end());
  b.add_alternative(root, call);
  b.add_alternative(root, b.literal("ab"));
  return std::move(b).build(root);
}

TEST(Matcher, AControlTokenWhereTheGrammarHasATokenElement) {
  Matcher m(compiled(token_grammar(1)));
  EXPECT_EQ(to_string(*token_grammar(1)), "root (root) ::= [a] <[1]> [b] [c] | [a] [b]\n");
  EXPECT_EQ(allowed_tokens(mask_of(m)), (std::vector<int32_t>{2, 5})) << "a, ab; not abc, which the token interrupts";
  EXPECT_EQ(m.forced_bytes(), "a") << "then the token or b: no byte is forced";
  EXPECT_FALSE(m.accept_token(1)) << "not before the a";
  ASSERT_TRUE(m.accept_token(2));
  EXPECT_EQ(allowed_tokens(mask_of(m)), (std::vector<int32_t>{1, 3}));  // the token, b
  EXPECT_EQ(m.forced_bytes(), "");
  EXPECT_EQ(m.forced_token(), -1) << "the token or b";
  EXPECT_FALSE(m.can_end());
  ASSERT_TRUE(m.accept_token(1));
  EXPECT_FALSE(m.accept_token(1)) << "once";
  EXPECT_EQ(allowed_tokens(mask_of(m)), std::vector<int32_t>{3});  // b ("bc" is no token)
  EXPECT_EQ(m.forced_bytes(), "bc");
  ASSERT_TRUE(m.accept_bytes("bc"));
  EXPECT_EQ(allowed_tokens(mask_of(m)), std::vector<int32_t>{0});
  EXPECT_EQ(m.accepted_steps(), 3);
  m.rollback(2);  // back to after the a
  ASSERT_TRUE(m.accept_token(3));  // b: the other alternative, complete
  EXPECT_TRUE(m.can_end());
  EXPECT_FALSE(m.accept_token(1));
  EXPECT_EQ(allowed_tokens(mask_of(m)), std::vector<int32_t>{0});
  EXPECT_TRUE(m.accept_token(0));
}

TEST(Matcher, AGrammarThatStartsWithAControlTokenForcesNoBytes) {
  GrammarBuilder b;
  const int32_t root = b.add_rule("root");
  b.add_alternative(root, {b.token(1), b.byte('x')});
  Matcher m(compiled(std::move(b).build(root)));
  EXPECT_EQ(allowed_tokens(mask_of(m)), std::vector<int32_t>{1});
  EXPECT_EQ(m.forced_bytes(), "");
  EXPECT_EQ(m.forced_token(), 1);
  EXPECT_FALSE(m.accept_bytes("x"));
  ASSERT_TRUE(m.accept_token(1));
  EXPECT_EQ(m.forced_bytes(), "x");
  EXPECT_EQ(m.forced_token(), -1);
}

// A token element of a text token: that token, not its bytes.
TEST(Matcher, ATextTokenElementAllowsThatTokenAndNotItsBytes) {
  GrammarBuilder b;
  const int32_t root = b.add_rule("root");
  b.add_alternative(root, {b.token(5), b.byte('c')});  // 5 is "ab"
  Matcher m(compiled(std::move(b).build(root)));
  EXPECT_EQ(allowed_tokens(mask_of(m)), std::vector<int32_t>{5});
  EXPECT_EQ(m.forced_bytes(), "");
  EXPECT_FALSE(m.accept_bytes("ab"));
  EXPECT_FALSE(m.accept_token(2)) << "a, the first byte, is not the token";
  EXPECT_FALSE(m.accept_token(6)) << "abc is another token";
  ASSERT_TRUE(m.accept_token(5));
  EXPECT_EQ(m.forced_bytes(), "c");

  // root ::= "a" | <[2]> "b", where token 2 is "a": both ways at once.
  GrammarBuilder both;
  const int32_t r = both.add_rule("root");
  both.add_alternative(r, both.literal("a"));
  both.add_alternative(r, {both.token(2), both.byte('b')});
  Matcher t(compiled(std::move(both).build(r)));
  Matcher bytes = t;
  ASSERT_TRUE(t.accept_token(2));
  EXPECT_TRUE(t.can_end()) << "as text";
  EXPECT_EQ(allowed_tokens(mask_of(t)), (std::vector<int32_t>{0, 3})) << "the end, or b after the token";
  ASSERT_TRUE(bytes.accept_bytes("a"));
  EXPECT_EQ(allowed_tokens(mask_of(bytes)), std::vector<int32_t>{0}) << "bytes are not the token";
}

// root ::= "a" !<[5]> "c": after the a, any one token but 5 and the end, whole.
TEST(Matcher, ANotTokenElementAllowsAnyOneTokenButItsOwn) {
  GrammarBuilder b;
  const int32_t root = b.add_rule("root");
  b.add_alternative(root, {b.byte('a'), b.not_token(5), b.byte('c')});
  Matcher m(compiled(std::move(b).build(root)));
  ASSERT_TRUE(m.accept_token(2));
  std::vector<int32_t> all_but;
  for (int32_t t = 1; t < m.vocab_size(); ++t) {
    if (t != 5) all_but.push_back(t);
  }
  EXPECT_EQ(allowed_tokens(mask_of(m)), all_but) << "the control token and every text token but ab";
  EXPECT_EQ(m.forced_bytes(), "");
  EXPECT_EQ(m.forced_token(), -1);
  EXPECT_FALSE(m.accept_token(5));
  EXPECT_FALSE(m.accept_token(0));
  EXPECT_FALSE(m.accept_bytes("b")) << "bytes are not a token";
  ASSERT_TRUE(m.accept_token(6)) << "abc, as one token";
  EXPECT_EQ(m.forced_bytes(), "c");
  m.rollback(1);
  ASSERT_TRUE(m.accept_token(1)) << "a control token";
  EXPECT_TRUE(m.accept_bytes("c"));
  EXPECT_TRUE(m.can_end());
}

TEST(Compile, ATokenElementMustBeATokenOfTheVocabularyButNotAnEnd) {
  const std::pair<int32_t, std::string> refused[] = {{0, "grammar token 0 is an end token"},
                                                     {16, "grammar token 16 is not in the vocabulary"}};
  for (const auto& [bad, message] : refused) {
    auto c = compile(*token_grammar(bad), toy_vocabulary());
    ASSERT_FALSE(c) << bad;
    EXPECT_NE(c.error().message.find(message), std::string::npos) << c.error().message;
  }
  EXPECT_TRUE(compile(*token_grammar(2), toy_vocabulary())) << "a text token";
  auto negative = token_grammar(-3);
  ASSERT_FALSE(negative);
  EXPECT_NE(negative.error().message.find("negative token"), std::string::npos) << negative.error().message;
}

TEST(Compile, RefusesLeftRecursionAndAMissingVocabulary) {
  Grammar g;
  g.rules.push_back(Rule{"root", {{Element{Element::Kind::rule, 0}}}});
  auto c = compile(g, toy_vocabulary());
  ASSERT_FALSE(c);
  EXPECT_NE(c.error().message.find("left-recursive"), std::string::npos);
  auto d = compile(*literal_grammar("a"), nullptr);
  ASSERT_FALSE(d);
  EXPECT_EQ(d.error().code, Errc::invalid_argument);
}

// A rule's return addresses are its own and those of every rule that reaches
// it by tail calls. flatten() computes them once per strongly connected
// component of the tail calls; here, the plain fixpoint (merge callers' sets
// until nothing changes) on random grammars with chains and cycles.
TEST(Matcher, ReturnAddressesAreTheFixpointOfTailCalls) {
  std::mt19937 rng(7);
  for (int round = 0; round < 200; ++round) {
    GrammarBuilder b;
    const int rules = 2 + int(rng() % 30);
    std::vector<int32_t> ids;
    for (int r = 0; r < rules; ++r) ids.push_back(b.add_rule("r" + std::to_string(r)));
    for (int r = 0; r < rules; ++r) {
      const int alts = 1 + int(rng() % 3);
      for (int a = 0; a < alts; ++a) {
        Alternative alt{b.byte(uint8_t('a' + rng() % 3))};
        const int refs = int(rng() % 3);
        for (int k = 0; k < refs; ++k) {
          alt.push_back(b.rule_ref(ids[rng() % ids.size()]));
          if (rng() % 2) alt.push_back(b.byte('x'));
        }
        b.add_alternative(ids[size_t(r)], std::move(alt));
      }
    }
    auto g = std::move(b).build(ids[0]);
    ASSERT_TRUE(g) << g.error().message;
    const detail::FlatGrammar f = detail::flatten(*g);
    const size_t n = f.rule_first_alt.size() - 1;
    std::vector<std::vector<int32_t>> expected(n), tail_callers(n);
    for (int32_t pos = 0; pos < f.positions(); ++pos) {
      const int32_t callee = f.slots[size_t(pos)].rule;
      if (callee < 0) continue;
      if (f.is_end(pos + 1)) {
        tail_callers[size_t(callee)].push_back(f.rule_of[size_t(pos)]);
      } else {
        expected[size_t(callee)].push_back(pos + 1);
      }
    }
    for (auto& e : expected) std::sort(e.begin(), e.end());
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t callee = 0; callee < n; ++callee) {
        for (int32_t caller : tail_callers[callee]) {
          std::vector<int32_t> merged;
          std::set_union(expected[callee].begin(), expected[callee].end(), expected[size_t(caller)].begin(),
                         expected[size_t(caller)].end(), std::back_inserter(merged));
          if (merged.size() != expected[callee].size()) expected[callee] = std::move(merged), changed = true;
        }
      }
    }
    ASSERT_EQ(f.rule_returns, expected) << "round " << round;
  }
}

}  // namespace
}  // namespace conveyor::grammar
