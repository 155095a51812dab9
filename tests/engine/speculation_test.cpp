// The ngram proposer, the adaptive draft length and the settings' ranges of
// speculative decoding (engine/speculation.hpp). The verify steps themselves
// run through the engine in tests/actors/speculative_test.cpp.
#include <gtest/gtest.h>

#include "engine/engine_config.hpp"
#include "engine/speculation.hpp"
#include "engine/suffix_store.hpp"
#include "grammar/json_schema.hpp"
#include "grammar/matcher.hpp"

namespace conveyor {
namespace {

std::vector<int32_t> propose(std::vector<int32_t> tokens, int32_t k, int32_t min_n = 1, int32_t max_n = 4) {
  std::vector<int32_t> drafts{99};  // cleared by the proposer
  propose_ngram(tokens, min_n, max_n, k, drafts);
  return drafts;
}

TEST(Ngram, ProposesWhatFollowedTheLatestEarlierOccurrence) {
  // "5 6" occurred twice before; the latest is followed by 9 8.
  EXPECT_EQ(propose({5, 6, 7, 1, 5, 6, 9, 8, 2, 5, 6}, 2), (std::vector<int32_t>{9, 8}));
  // The longest suffix that matches wins: "3 5 6" matches the first occurrence only.
  EXPECT_EQ(propose({3, 5, 6, 7, 1, 5, 6, 9, 8, 3, 5, 6}, 2), (std::vector<int32_t>{7, 1}));
  // Fewer than k tokens follow it: a continuation that reaches the end goes
  // on with the drafts (a cycle repeats).
  EXPECT_EQ(propose({1, 2, 3, 1, 2, 3, 1, 2}, 5), (std::vector<int32_t>{3, 1, 2, 3, 1}));
  EXPECT_EQ(propose({4, 4, 4}, 3), (std::vector<int32_t>{4, 4, 4}));
}

TEST(Ngram, ProposesNothingWithoutAMatch) {
  EXPECT_TRUE(propose({1, 2, 3, 4}, 4).empty());
  EXPECT_TRUE(propose({7}, 4).empty());
  EXPECT_TRUE(propose({}, 4).empty());
  EXPECT_TRUE(propose({1, 2, 1}, 0).empty());
  // A suffix shorter than min_n is never tried.
  EXPECT_TRUE(propose({1, 2, 9, 1}, 4, 2, 4).empty());
  EXPECT_EQ(propose({1, 2, 9, 1}, 4, 1, 4), (std::vector<int32_t>{2, 9, 1, 2}));
}

// Jump-forward: the bytes a schema forces, as the longest tokens that spell
// them; the matcher is left where it was.
TEST(JumpForward, ProposesTheLongestTokensOfTheForcedBytes) {
  grammar::VocabularyBytes v;
  v.tokens = {"", "{", "\"", "\"na", "\"name", "me", "\":", " ", "1", "2", "}", "a", "n"};
  v.end_ids = {0};
  auto index = grammar::index_vocabulary(v);
  EXPECT_EQ(index->longest_prefix("\"name\":"), (std::pair<int32_t, size_t>{4, 5}));
  EXPECT_EQ(index->longest_prefix("xyz"), (std::pair<int32_t, size_t>{-1, 0}));
  auto g = grammar::grammar_from_json_schema(
      R"({"type":"object","properties":{"name":{"type":"integer"}},"required":["name"]})");
  ASSERT_TRUE(g.has_value()) << g.error().message;
  auto compiled = grammar::compile(std::move(g).value(), index);
  ASSERT_TRUE(compiled.has_value()) << compiled.error().message;
  grammar::Matcher m(*compiled);
  std::vector<int32_t> drafts;
  propose_forced(**compiled, m, 8, drafts);
  EXPECT_EQ(drafts, (std::vector<int32_t>{1, 4, 6}));  // {  "name  ":
  EXPECT_EQ(m.accepted_steps(), 0);
  propose_forced(**compiled, m, 2, drafts);
  EXPECT_EQ(drafts, (std::vector<int32_t>{1, 4}));
  ASSERT_TRUE(m.accept_token(1));
  ASSERT_TRUE(m.accept_token(3));  // "na: the rest of the name is forced
  propose_forced(**compiled, m, 8, drafts);
  EXPECT_EQ(drafts, (std::vector<int32_t>{5, 6}));
  EXPECT_EQ(m.accepted_steps(), 2);
}

// A token the grammar forces (a token element) is drafted too, and the
// forced bytes after it: Mistral's [TOOL_CALLS]name[ARGS]{ of a single tool.
TEST(JumpForward, DraftsTheTokensTheGrammarForces) {
  grammar::VocabularyBytes v;
  v.tokens = {"", "", "", "na", "name", "{", "}", "\"", "e"};  // 1 and 2: control tokens
  v.end_ids = {0};
  grammar::GrammarBuilder b;
  const int32_t root = b.add_rule("root");
  grammar::Alternative alt{b.token(1)};
  for (const grammar::Element& e : b.literal("name")) alt.push_back(e);
  alt.push_back(b.token(2));
  alt.push_back(b.byte('{'));
  alt.push_back(b.star({b.byte('e')}));
  alt.push_back(b.byte('}'));
  b.add_alternative(root, alt);
  auto compiled = grammar::compile(std::move(b).build(root).value(), grammar::index_vocabulary(v));
  ASSERT_TRUE(compiled.has_value()) << compiled.error().message;
  grammar::Matcher m(*compiled);
  std::vector<int32_t> drafts;
  propose_forced(**compiled, m, 8, drafts);
  EXPECT_EQ(drafts, (std::vector<int32_t>{1, 4, 2, 5}));  // [TOOL_CALLS] name [ARGS] {, then a choice
  EXPECT_EQ(m.accepted_steps(), 0);
  propose_forced(**compiled, m, 3, drafts);
  EXPECT_EQ(drafts, (std::vector<int32_t>{1, 4, 2}));
  ASSERT_TRUE(m.accept_token(1));
  ASSERT_TRUE(m.accept_token(3));  // na: "me" is forced, but no token ends where it does
  propose_forced(**compiled, m, 8, drafts);
  EXPECT_TRUE(drafts.empty()) << "no token spells \"me\"";
}

TEST(SuffixStore, ProposesFromTheLatestSequenceWithTheLongestTail) {
  SuffixStore store(64, 1, 3);
  store.add(std::vector<int32_t>{1, 2, 3, 4, 5, 6});
  store.add(std::vector<int32_t>{9, 3, 4, 7, 8});
  std::vector<int32_t> drafts;
  // "2 3 4" occurred in the first only; "3 4" in both, the latest in the second.
  EXPECT_EQ(store.propose(std::vector<int32_t>{0, 2, 3, 4}, 4, drafts), 3);
  EXPECT_EQ(drafts, (std::vector<int32_t>{5, 6}));  // a continuation stops at its sequence's end
  EXPECT_EQ(store.propose(std::vector<int32_t>{0, 3, 4}, 4, drafts), 2);
  EXPECT_EQ(drafts, (std::vector<int32_t>{7, 8}));
  EXPECT_EQ(store.propose(std::vector<int32_t>{42}, 4, drafts), 0);
  EXPECT_TRUE(drafts.empty());
  // Nothing follows a sequence's last token, and no n-gram spans two sequences.
  EXPECT_EQ(store.propose(std::vector<int32_t>{6, 9}, 4, drafts), 1);
  EXPECT_EQ(drafts, (std::vector<int32_t>{3, 4, 7, 8}));
  EXPECT_EQ(store.propose(std::vector<int32_t>{8}, 4, drafts), 0);
}

TEST(SuffixStore, DropsTheOlderHalfWhenFull) {
  SuffixStore store(20, 1, 2);
  for (int32_t i = 0; i < 10; ++i) store.add(std::vector<int32_t>{100 + i, 200 + i, 300 + i});
  EXPECT_LE(store.size(), 20u);
  std::vector<int32_t> drafts;
  EXPECT_EQ(store.propose(std::vector<int32_t>{109}, 4, drafts), 1);  // the latest is kept
  EXPECT_EQ(drafts, (std::vector<int32_t>{209, 309}));
  EXPECT_EQ(store.propose(std::vector<int32_t>{100}, 4, drafts), 0);  // the first is gone
  store.add(std::vector<int32_t>(40, 5));  // longer than the store: its tail is kept
  EXPECT_LE(store.size(), 20u);
  // The latest "5 5" with something after it is the one before the last.
  EXPECT_EQ(store.propose(std::vector<int32_t>{5, 5}, 3, drafts), 2);
  EXPECT_EQ(drafts, (std::vector<int32_t>{5}));
}

TEST(DraftLength, GrowsWhileAllAreAcceptedAndShrinksToWhatWas) {
  DraftLength d{5};
  d.update(5, 5, 5);
  EXPECT_EQ(d.next, 5);  // at the most already
  d.update(5, 1, 5);
  EXPECT_EQ(d.next, 2);
  d.update(2, 2, 5);
  EXPECT_EQ(d.next, 3);
  d.update(3, 0, 5);
  EXPECT_EQ(d.next, 1);
  d.update(0, 0, 5);  // no drafts: nothing learned
  EXPECT_EQ(d.next, 1);
  EXPECT_TRUE(d.may_draft());
}

TEST(DraftLength, PausesAfterMissesAndBacksOff) {
  DraftLength d{3};
  d.update(3, 0, 5);
  EXPECT_TRUE(d.may_draft());  // one miss: try again
  d.update(1, 0, 5);           // two: pause 2 steps
  EXPECT_FALSE(d.may_draft());
  EXPECT_FALSE(d.may_draft());
  EXPECT_TRUE(d.may_draft());
  d.update(1, 0, 5);  // three: 4 steps
  for (int i = 0; i < 4; ++i) EXPECT_FALSE(d.may_draft());
  EXPECT_TRUE(d.may_draft());
  for (int i = 0; i < 10; ++i) d.update(1, 0, 5);
  EXPECT_EQ(d.pause, 32);  // at most
  d.pause = 0;
  d.update(1, 1, 5);  // a hit ends the misses
  EXPECT_EQ(d.misses, 0);
  EXPECT_EQ(d.pause, 0);
}

TEST(SpeculativeConfig, RangesAndTheDeviceAreChecked) {
  EXPECT_EQ(parse_speculative("ngram")->method, SpeculativeMethod::ngram);
  EXPECT_EQ(parse_speculative("none")->method, SpeculativeMethod::none);
  EXPECT_EQ(parse_speculative("suffix")->method, SpeculativeMethod::suffix);
  const auto draft = parse_speculative("draft:/models/small.gguf");
  ASSERT_TRUE(draft.has_value());
  EXPECT_EQ(draft->method, SpeculativeMethod::draft);
  EXPECT_EQ(draft->draft_model, "/models/small.gguf");
  EXPECT_EQ(to_string(*draft), "draft:/models/small.gguf");
  auto bad = parse_speculative("eagle");
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.error().message.find("draft:FILE"), std::string::npos);
  bad = parse_speculative("draft:");
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.error().message.find("file is missing"), std::string::npos);

  SpeculativeConfig c;
  c.method = SpeculativeMethod::ngram;
  EXPECT_TRUE(validate(c).is_ok());
  c.num_tokens = 17;
  EXPECT_NE(validate(c).error().message.find("--speculative-tokens"), std::string::npos);
  c.num_tokens = 4;
  c.ngram_min = 3;
  c.ngram_max = 2;
  EXPECT_NE(validate(c).error().message.find("--speculative-ngram-max"), std::string::npos);
  c.ngram_max = 4;
  c.draft_model = "small.gguf";  // with ngram
  EXPECT_NE(validate(c).error().message.find("draft:FILE"), std::string::npos);
  c.method = SpeculativeMethod::draft;
  EXPECT_TRUE(validate(c).is_ok());

  EngineConfig e;
  e.speculative.method = SpeculativeMethod::ngram;
  EXPECT_TRUE(validate(e).is_ok());
  e.device = DeviceSpec{DeviceKind::cuda, 0};
  EXPECT_TRUE(validate(e).is_ok()) << "the CUDA runner verifies drafts";
  e.speculative.method = SpeculativeMethod::draft;
  e.speculative.draft_model = "small.gguf";
  const Status cuda = validate(e);
  ASSERT_FALSE(cuda.is_ok());
  EXPECT_NE(cuda.error().message.find("--speculative"), std::string::npos);
  EXPECT_NE(cuda.error().message.find("draft:FILE"), std::string::npos);
}

}  // namespace
}  // namespace conveyor
