// A Sampler with a grammar: every sampled token is one the grammar allows,
// end tokens come exactly where the text may end, logprobs stay the model's,
// and replay() (a restart, a router's resume) brings the grammar's state
// along with the generator's.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "grammar/grammar.hpp"
#include "grammar/matcher.hpp"
#include "grammar/vocabulary.hpp"
#include "model/sampling/sampler.hpp"

namespace conveyor {
namespace {

// A toy vocabulary: single characters, some multi-character pieces, a
// control token ("") and the end token 1.
const std::vector<std::string> kTokens = {"", "", "a", "b", "ab", "ba", "(", ")", "((", "))", "x", "()"};
constexpr int32_t kEnd = 1;

// Balanced parentheses around a run of a/b: root ::= "(" root ")" | [ab]+
GrammarConstraint balanced() {
  grammar::GrammarBuilder b;
  const int32_t root = b.add_rule("root");
  const int32_t letters = b.add_rule("letters");
  grammar::ByteSet ab;
  ab.set('a');
  ab.set('b');
  b.add_alternative(letters, {b.plus({b.bytes(ab)})});
  b.add_alternative(root, {b.byte('('), b.rule_ref(root), b.byte(')')});
  b.add_alternative(root, {b.rule_ref(letters)});
  auto g = std::move(b).build(root);
  EXPECT_TRUE(g) << g.error().message;
  auto vocab = grammar::index_vocabulary({kTokens, {kEnd}});
  auto ir = std::make_shared<const grammar::Grammar>(*g);
  auto compiled = grammar::compile(*g, vocab);
  EXPECT_TRUE(compiled);
  return GrammarConstraint{ir, *compiled};
}

bool balanced_text(const std::string& s) {
  size_t open = 0;
  while (open < s.size() && s[open] == '(') ++open;
  size_t close = 0;
  while (close < s.size() && s[s.size() - 1 - close] == ')') ++close;
  if (open != close || open * 2 >= s.size()) return false;
  for (size_t i = open; i < s.size() - close; ++i)
    if (s[i] != 'a' && s[i] != 'b') return false;
  return true;
}

std::string generate(Sampler& sampler, std::mt19937& gen, std::vector<int32_t>& ids, int32_t limit = 200) {
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::string text;
  for (int32_t step = 0; step < limit; ++step) {
    std::vector<float> logits(kTokens.size());
    for (float& l : logits) l = normal(gen);
    const int32_t token = sampler.sample(logits).token;
    ids.push_back(token);
    if (token == kEnd) return text;
    text += kTokens[size_t(token)];
  }
  ADD_FAILURE() << "no end after " << limit << " tokens: " << text;
  return text;
}

TEST(SamplerGrammar, EverySampleFollowsTheGrammarAndEnds) {
  const GrammarConstraint g = balanced();
  std::mt19937 gen(7);
  for (uint64_t seed = 0; seed < 200; ++seed) {
    SamplingParams p;
    p.seed = seed;
    p.has_seed = true;
    p.temperature = 1.0f;
    p.grammar = g;
    ASSERT_TRUE(validate(p, int32_t(kTokens.size())));
    Sampler sampler(p, {});
    EXPECT_FALSE(sampler.device_samplable());
    std::vector<int32_t> ids;
    const std::string text = generate(sampler, gen, ids);
    EXPECT_TRUE(balanced_text(text)) << "seed " << seed << ": " << text;
    for (int32_t id : ids) EXPECT_NE(id, 0) << "a control token was sampled";
  }
}

TEST(SamplerGrammar, GreedyPicksTheBestAllowedToken) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.grammar = balanced();
  Sampler sampler(p, {});
  // "x" (10) and the end token are the model's favourites; neither is allowed first.
  std::vector<float> logits(kTokens.size(), 0.0f);
  logits[10] = 9.0f;
  logits[kEnd] = 8.0f;
  logits[6] = 1.0f;  // "("
  logits[2] = 2.0f;  // "a"
  EXPECT_EQ(sampler.sample(logits).token, 2);
  // After "a" the text may end, so the end token (8.0) beats "b"
  std::vector<float> next(kTokens.size(), 0.0f);
  next[kEnd] = 8.0f;
  next[3] = 3.0f;
  EXPECT_EQ(sampler.sample(next).token, kEnd);
}

TEST(SamplerGrammar, LogprobsStayTheModels) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.logprobs = 2;
  p.grammar = balanced();
  Sampler sampler(p, {});
  std::vector<float> logits(kTokens.size(), 0.0f);
  logits[10] = 5.0f;  // "x": refused by the grammar, still the model's top token
  const SampleResult r = sampler.sample(logits);
  EXPECT_NE(r.token, 10);
  ASSERT_FALSE(r.top.empty());
  EXPECT_EQ(r.top[0].token, 10);
}

TEST(SamplerGrammar, ReplayBringsTheGrammarAlong) {
  SamplingParams p;
  p.seed = 11;
  p.has_seed = true;
  p.grammar = balanced();
  Sampler first(p, {});
  std::mt19937 gen(3);
  std::vector<int32_t> ids;
  generate(first, gen, ids);
  ASSERT_GT(ids.size(), 2u);
  // A sampler that replays all but the last two tokens continues as the
  // first did: same generator position, same grammar state.
  const size_t cut = ids.size() - 2;
  std::mt19937 again(3);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<std::vector<float>> rows;
  for (size_t i = 0; i < ids.size(); ++i) {
    std::vector<float> logits(kTokens.size());
    for (float& l : logits) l = normal(again);
    rows.push_back(std::move(logits));
  }
  Sampler resumed(p, {});
  resumed.replay(std::span<const int32_t>(ids).first(cut));
  for (size_t i = cut; i < ids.size(); ++i) EXPECT_EQ(resumed.sample(rows[i]).token, ids[i]) << i;
}

TEST(SamplerGrammar, IgnoreEosAndAnUnboundGrammarAreRefused) {
  SamplingParams p;
  p.grammar = balanced();
  p.ignore_eos = true;
  auto s = validate(p, int32_t(kTokens.size()));
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message.find("ignore_eos"), std::string::npos);
  SamplingParams unbound;
  unbound.grammar.ir = balanced().ir;
  auto u = validate(unbound, int32_t(kTokens.size()));
  ASSERT_FALSE(u);
  EXPECT_NE(u.error().message.find("not compiled"), std::string::npos);
}

}  // namespace
}  // namespace conveyor
