// Token masks against brute force (every token tried on a copy of the
// matcher): a JSON grammar on a toy vocabulary along random walks, random
// grammars, and the real Llama 3 and Qwen 2 vocabularies (128k and 151k
// tokens) in a few states.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>
#include <string>
#include <thread>

#include "grammar/json_schema.hpp"
#include "grammar/matcher.hpp"
#include "model/formats/gguf_llama.hpp"
#include "model/sampling/grammar_vocabulary.hpp"
#include "tests/grammar/earley.hpp"
#include "tests/grammar/mask_oracle.hpp"
#include "tests/shared_models.hpp"

namespace conveyor::grammar {
namespace {

using testing::allowed_tokens;
using testing::brute_force_mask;
using testing::mask_difference;
using testing::mask_of;

// Walks `steps` random tokens from the allowed ones, checking every mask
// against brute force and, now and then, rolling back and checking the mask
// of the earlier state again.
void random_walk(const std::shared_ptr<const CompiledGrammar>& g, uint32_t seed, int steps) {
  std::mt19937 rng(seed);
  Matcher m(g);
  std::vector<std::vector<uint64_t>> masks;
  for (int step = 0; step < steps; ++step) {
    const auto got = mask_of(m);
    const auto want = brute_force_mask(m);
    ASSERT_EQ(got, want) << "seed " << seed << " step " << step << ":"
                         << mask_difference(got, want, g->vocabulary());
    masks.push_back(got);
    if (m.accepted_steps() > 3 && rng() % 8 == 0) {
      const int back = int(rng() % 3) + 1;
      m.rollback(back);
      masks.resize(masks.size() - size_t(back));
      ASSERT_EQ(mask_of(m), masks.back()) << "after rolling back " << back;
      masks.pop_back();
      continue;
    }
    std::vector<int32_t> allowed = allowed_tokens(got);
    // Prefer text to ending, so walks go deep.
    std::erase_if(allowed, [&](int32_t t) { return g->vocabulary().is_end(t) && allowed.size() > 1; });
    if (allowed.empty()) break;
    ASSERT_TRUE(m.accept_token(allowed[rng() % allowed.size()]));
    if (m.is_terminated()) break;
  }
}

std::shared_ptr<const TokenIndex> toy_json_vocabulary() {
  VocabularyBytes v;
  v.tokens = {"", "{", "}", "{\"", "\"", "\":", "\",", "\"}", ":", ",", " ", "  ", "\n", "[", "]", "a", "b",
              "ab", "abc", "\"a", "1", "12", "0", "-", ".", "e", "E+", "true", "false", "null", "\\", "\\\"",
              "\\n", "\\u", "00", "0a", "\xC3\xA9", "\xC3", "\xA9", "\": \"", "\"}]", " {\"", "},", "],", "\"\"",
              "[{", "}}", "]}", "1.5", "e-", "\t", "u", "ta", "nul", "l", "\",\"", ", ", ": ", "\xE4\xB8", "\x80",
              "x\"", "\"x"};
  v.end_ids = {0};
  return index_vocabulary(std::move(v));
}

TEST(TokenMask, JsonGrammarOnAToyVocabularyMatchesBruteForce) {
  auto g = compile(testing::json_grammar(), toy_json_vocabulary());
  ASSERT_TRUE(g) << g.error().message;
  for (uint32_t seed = 1; seed <= 40; ++seed) random_walk(*g, seed, 60);
}

// A random grammar over the bytes a, b, c: rules of random alternatives of
// byte classes, references (to any rule, so recursion happens; check()
// refuses the left-recursive ones) and stars, pluses and options.
// With `tokens`, a token or not_token element now and then (of control token 1 or a text token).
Expected<Grammar> random_grammar(std::mt19937& rng, bool tokens = false) {
  GrammarBuilder b;
  const int rules = 2 + int(rng() % 4);
  std::vector<int32_t> ids;
  for (int r = 0; r < rules; ++r) ids.push_back(b.add_rule("r"));
  const auto random_class = [&] {
    ByteSet s;
    for (uint8_t c : {'a', 'b', 'c'}) {
      if (rng() % 2) s.set(c);
    }
    if (s.empty()) s.set('a');
    return b.bytes(s);
  };
  for (int r = 0; r < rules; ++r) {
    const int alts = 1 + int(rng() % 3);
    for (int a = 0; a < alts; ++a) {
      Alternative alt;
      const int len = int(rng() % 4);
      for (int i = 0; i < len; ++i) {
        if (tokens && rng() % 5 == 0) {  // the control token, or one of abc_vocabulary's text tokens
          const int32_t id = rng() % 2 ? 1 : 2 + int32_t(rng() % 41);
          alt.push_back(rng() % 4 ? b.token(id) : b.not_token(id));
          continue;
        }
        switch (rng() % 6) {
          case 0: alt.push_back(b.rule_ref(ids[rng() % ids.size()])); break;
          case 1: alt.push_back(b.star({random_class()})); break;
          case 2: alt.push_back(b.plus({random_class(), random_class()})); break;
          case 3: alt.push_back(b.optional({random_class()})); break;
          default: alt.push_back(random_class());
        }
      }
      b.add_alternative(ids[size_t(r)], std::move(alt));
    }
  }
  return std::move(b).build(ids[0]);
}

std::shared_ptr<const TokenIndex> abc_vocabulary() {
  VocabularyBytes v;
  v.tokens = {"", ""};  // the end token, a control token
  v.end_ids = {0};
  for (std::string x : {"a", "b", "c"}) {
    v.tokens.push_back(x);
    for (std::string y : {"a", "b", "c"}) {
      v.tokens.push_back(x + y);
      for (std::string z : {"a", "b", "c"}) v.tokens.push_back(x + y + z);
    }
  }
  v.tokens.push_back("abcabc");
  v.tokens.push_back("cccccccc");
  return index_vocabulary(std::move(v));
}

TEST(TokenMask, RandomGrammarsMatchBruteForce) {
  std::mt19937 rng(2026);
  const auto vocab = abc_vocabulary();
  int tested = 0;
  for (int i = 0; i < 400 && tested < 150; ++i) {
    auto g = random_grammar(rng);
    if (!g) continue;  // left-recursive
    auto c = compile(std::move(*g), vocab);
    ASSERT_TRUE(c) << c.error().message;
    random_walk(*c, uint32_t(i), 25);
    if (HasFatalFailure()) {
      ADD_FAILURE() << to_string((*c)->grammar());
      return;
    }
    ++tested;
  }
  EXPECT_GE(tested, 100);
}

TEST(TokenMask, RandomGrammarsWithTokenElementsMatchBruteForce) {
  std::mt19937 rng(2027);
  const auto vocab = abc_vocabulary();
  int tested = 0, with_token = 0;
  for (int i = 0; i < 400 && tested < 150; ++i) {
    auto g = random_grammar(rng, true);
    if (!g) continue;  // left-recursive
    with_token += token_elements(*g).empty() ? 0 : 1;
    auto c = compile(std::move(*g), vocab);
    ASSERT_TRUE(c) << c.error().message;
    random_walk(*c, uint32_t(i), 25);
    // Sentences of the bytes a, b, c and control token 1: the matcher's
    // language is the Earley recognizer's (bytes never match a text token's element).
    for (int k = 0; k < 40 && !HasFatalFailure(); ++k) {
      std::vector<int32_t> text;
      for (int n = int(rng() % 7); n > 0; --n) {
        const uint32_t pick = rng() % 4;
        text.push_back(pick == 3 ? testing::kTokenSymbol + 1 : int32_t('a' + pick));
      }
      Matcher m(*c);
      bool ok = true;
      for (int32_t sym : text) {
        ok = ok && (sym >= testing::kTokenSymbol ? m.accept_token(sym - testing::kTokenSymbol)
                                                  : m.accept_bytes(std::string(1, char(sym))));
      }
      ASSERT_EQ(ok && m.can_end(), testing::earley_accepts((*c)->grammar(), text)) << "sentence " << k;
    }
    if (HasFatalFailure()) {
      ADD_FAILURE() << to_string((*c)->grammar());
      return;
    }
    ++tested;
  }
  EXPECT_GE(tested, 100);
  EXPECT_GE(with_token, 50);
}

// `b`'s grammar from `root` compiled on a vocabulary of `tokens` whose
// token 0 is the end token.
Expected<std::shared_ptr<const CompiledGrammar>> compile_on(GrammarBuilder&& b, int32_t root,
                                                            std::vector<std::string> tokens) {
  auto grammar = std::move(b).build(root);
  if (!grammar) return grammar.error();
  VocabularyBytes v;
  v.tokens = std::move(tokens);
  v.end_ids = {0};
  return compile(std::move(*grammar), index_vocabulary(std::move(v)));
}

TEST(TokenMask, PrecomputeGivesTheSameMasksAsLazyUse) {
  auto lazy = compile(testing::json_grammar(), toy_json_vocabulary());
  auto eager = compile(testing::json_grammar(), toy_json_vocabulary());
  ASSERT_TRUE(lazy && eager);
  // Before any mask: the grammar's own bytes (its rules and flat form).
  const size_t own = (*eager)->cache_stats().grammar_bytes;
  EXPECT_GT(own, 0u);
  EXPECT_GE((*eager)->memory_bytes(), own);
  EXPECT_EQ((*eager)->memory_bytes(), (*eager)->cache_stats().memory_bytes);
  (*eager)->precompute();
  EXPECT_EQ((*eager)->cache_stats().cached, (*eager)->cache_stats().positions);
  // The running total the server's cache reads is what cache_stats() sums.
  EXPECT_GT((*eager)->memory_bytes(), own + 4096);
  EXPECT_EQ((*eager)->memory_bytes(), (*eager)->cache_stats().memory_bytes);
  Matcher a(*lazy), b(*eager);
  for (std::string_view piece : {"{", "\"a", "\":", " [", "1.5", ", ", "\"\\u00e9\"", "]"}) {
    ASSERT_TRUE(a.accept_bytes(piece) && b.accept_bytes(piece)) << piece;
    EXPECT_EQ(mask_of(a), mask_of(b)) << piece;
  }
}

TEST(TokenMask, BoundedRepetitionSharesMasksAndStaysExact) {
  // "[a-z ]{0,40}" then "," and a digit: a position per count; far from
  // the end, counts behave alike and share a mask, near it they must not
  // (the 20- and 24-byte tokens fit only while 20 or 24 counts are left).
  GrammarBuilder b;
  const int32_t root = b.add_rule("root");
  Alternative alt = b.literal("\"");
  alt.push_back(b.repeat({b.codepoints({{'a', 'z'}, {' ', ' '}})}, 0, 40));
  for (const Element& e : b.literal("\",")) alt.push_back(e);
  alt.push_back(b.codepoints({{'0', '9'}}));
  b.add_alternative(root, alt);
  auto g = compile_on(std::move(b), root,
                      {"", "\"", "a", "b", " ", "ab", "abc", " a", "\",", "\",1", "a\",", "ab\",2", "1", "7",
                       std::string(20, 'a'), std::string(24, ' '), std::string(17, 'b') + "\",",
                       std::string(19, 'c') + "\",3"});
  ASSERT_TRUE(g) << g.error().message;
  Matcher m(*g);
  for (int step = 0; step < 45; ++step) {
    const auto want = brute_force_mask(m);
    ASSERT_EQ(mask_of(m), want) << "after " << step << " tokens:" << mask_difference(mask_of(m), want, (*g)->vocabulary());
    // One count at a time (token "a"), so every position of the repetition is met.
    if (!m.accept_token(step == 0 ? 1 : 2)) break;
  }
  const auto stats = (*g)->cache_stats();
  EXPECT_LT(stats.distinct, stats.cached) << "no two counts shared a mask";
}

TEST(TokenMask, FollowBytesKeepOnlySuffixesACallerCanTake) {
  // A bounded string is a chain of rules, one per count, each ending after
  // every character: without follow bytes every token of letters too long
  // for the count left was kept, at each offset, for the caller to reject.
  GrammarBuilder b;
  const int32_t root = b.add_rule("root");
  Alternative alt = b.literal("\"");
  alt.push_back(b.repeat({b.codepoints({{'a', 'z'}})}, 0, 6));
  for (const Element& e : b.literal("\",")) alt.push_back(e);
  alt.push_back(b.codepoints({{'0', '9'}}));
  b.add_alternative(root, alt);
  auto g = compile_on(std::move(b), root,
                      {"", "\"", "a", "ab", "abc", "abcd", "abcdefgh", "b\"", "ab\",", "abc\",1", "\",", "\",2", "1", "z\"x"});
  ASSERT_TRUE(g) << g.error().message;
  const detail::FlatGrammar& f = (*g)->flat();
  ByteSet quote;
  quote.set('"');
  int32_t letters = 0;
  for (int32_t p = 0; p < f.positions(); ++p) {
    const detail::FlatGrammar::Slot& slot = f.slots[size_t(p)];
    if (slot.byte_set < 0 || !f.byte_sets[size_t(slot.byte_set)].test('a') || !f.has_caller(p)) continue;
    ++letters;
    EXPECT_EQ(f.follow[size_t(f.rule_of[size_t(p)])], quote) << "position " << p;
  }
  EXPECT_GT(letters, 0) << "the repetition was not a rule with a caller";
  Matcher m(*g);
  for (int step = 0; step < 8; ++step) {
    const auto want = brute_force_mask(m);
    ASSERT_EQ(mask_of(m), want) << "after " << step << " tokens:" << mask_difference(mask_of(m), want, (*g)->vocabulary());
    if (!m.accept_token(step == 0 ? 1 : 2)) break;
  }
}

TEST(TokenMask, AlikeRulesFollowedByDifferentBytesKeepTheirOwnMasks) {
  // A and B have one shape and behave alike byte for byte, but "x" follows
  // A and "y" follows B: a mask shared between them would keep the wrong
  // suffixes ("ax" after "<", "ay" after "[").
  GrammarBuilder b;
  const int32_t root = b.add_rule("root");
  const int32_t a = b.add_rule("a");
  const int32_t c = b.add_rule("b");
  for (int32_t r : {a, c}) b.add_alternative(r, {b.codepoints({{'a', 'z'}}), b.optional({b.codepoints({{'a', 'z'}})})});
  Alternative left = b.literal("<");
  left.push_back(b.rule_ref(a));
  for (const Element& e : b.literal("x")) left.push_back(e);
  Alternative right = b.literal("[");
  right.push_back(b.rule_ref(c));
  for (const Element& e : b.literal("y")) right.push_back(e);
  b.add_alternative(root, left);
  b.add_alternative(root, right);
  auto g = compile_on(std::move(b), root, {"", "<", "[", "a", "ab", "ax", "ay", "abx", "aby", "x", "y", "axy", "<a", "[ay"});
  ASSERT_TRUE(g) << g.error().message;
  for (std::string_view start : {"<", "["}) {
    Matcher m(*g);
    ASSERT_TRUE(m.accept_bytes(start));
    for (std::string_view piece : {"", "a", "b"}) {
      ASSERT_TRUE(m.accept_bytes(piece)) << start << piece;
      const auto want = brute_force_mask(m);
      ASSERT_EQ(mask_of(m), want) << "after " << start << piece << ":"
                                  << mask_difference(mask_of(m), want, (*g)->vocabulary());
    }
  }
}

TEST(TokenMask, ALongMinimumRepeatsAsAChainWhoseCountsShareMasks) {
  // minLength 1000 was a thousand references in a row, each a return
  // address with masks of its own: about a megabyte of masks a token on a
  // real vocabulary. Chained, the counts far from the end share theirs.
  auto schema = grammar_from_json_schema(R"({"type": "string", "minLength": 1000})");
  ASSERT_TRUE(schema) << schema.error().message;
  auto g = compile(std::move(*schema), toy_json_vocabulary());
  ASSERT_TRUE(g) << g.error().message;
  Matcher m(*g);
  ASSERT_TRUE(m.accept_bytes("\""));
  for (int step = 0; step < 300; ++step) {
    if (step % 50 == 0) {
      const auto want = brute_force_mask(m);
      ASSERT_EQ(mask_of(m), want) << "after " << step << " tokens";
    } else {
      (void)mask_of(m);
    }
    ASSERT_TRUE(m.accept_bytes(step % 2 ? "ab" : "\xC3\xA9"));
  }
  const auto stats = (*g)->cache_stats();
  EXPECT_GT(stats.cached, 300);
  EXPECT_LT(stats.stored, 40) << "counts far from the end computed masks of their own";
  // In a row: 3,900 (mask, return address) pairs after these 300 tokens, and growing.
  EXPECT_LT(stats.returns, 200);
}

TEST(TokenMask, ADfaPastItsBudgetIsDroppedAndItsMasksStayExact) {
  // Many required properties: every position of every name brings DFA
  // states of its own, so the DFA grows with the positions reached.
  std::string props, required;
  for (int i = 0; i < 120; ++i) {
    std::string name = "\"";
    for (int bit = 0; bit < 7; ++bit) name += (i >> bit) & 1 ? 'b' : 'a';
    name += '"';
    props += (i ? ", " : "") + name + ": {\"type\": \"boolean\"}";
    required += (i ? ", " : "") + name;
  }
  auto schema = grammar_from_json_schema(R"({"type": "object", "properties": {)" + props + R"(}, "required": [)" +
                                         required + R"(], "additionalProperties": false})");
  ASSERT_TRUE(schema) << schema.error().message;
  constexpr size_t kBudget = size_t(48) << 10;
  auto bounded = compile(*schema, toy_json_vocabulary(), {.dfa_budget_bytes = kBudget});
  auto unbounded = compile(*schema, toy_json_vocabulary(), {.dfa_budget_bytes = SIZE_MAX});
  ASSERT_TRUE(bounded && unbounded);
  std::mt19937 rng(7);
  Matcher a(*bounded), b(*unbounded);
  size_t most = 0;
  for (int step = 0; step < 2000 && !a.is_terminated(); ++step) {
    const auto got = mask_of(a);
    ASSERT_EQ(got, mask_of(b)) << "step " << step;
    if (step % 100 == 0) {
      ASSERT_EQ(got, brute_force_mask(a)) << "step " << step;
    }
    most = std::max(most, (*bounded)->cache_stats().dfa_bytes);
    std::vector<int32_t> allowed = allowed_tokens(got);
    std::erase_if(allowed, [&](int32_t t) { return (*bounded)->vocabulary().is_end(t) && allowed.size() > 1; });
    ASSERT_FALSE(allowed.empty());
    const int32_t t = allowed[rng() % allowed.size()];
    ASSERT_TRUE(a.accept_token(t));
    ASSERT_TRUE(b.accept_token(t));
  }
  EXPECT_TRUE(a.is_terminated()) << "the walk did not reach the end of the object";
  EXPECT_GT((*unbounded)->cache_stats().dfa_bytes, 4 * kBudget) << "the walk never passed the budget";
  // Checked before each mask, and its tables grow by doubling: up to about
  // twice the budget.
  EXPECT_LE(most, 2 * kBudget + (size_t(16) << 10));
}

TEST(TokenMask, ThreadsShareALazilyFilledGrammar) {
  // The masks are computed lazily by whichever thread meets a position
  // first; every thread's masks must still match brute force.
  auto g = compile(testing::json_grammar(), toy_json_vocabulary());
  ASSERT_TRUE(g) << g.error().message;
  std::vector<std::thread> threads;
  for (uint32_t t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (uint32_t seed = 100 + t * 10; seed < 105 + t * 10; ++seed) random_walk(*g, seed, 60);
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_GT((*g)->cache_stats().cached, 0);
}

// The vocabulary of the GGUF file at `path`; null (with a failure) when it
// does not read.
std::shared_ptr<const TokenIndex> vocabulary_of(const std::string& path) {
  auto file = read_gguf(path);
  if (!file) {
    ADD_FAILURE() << file.error().message;
    return nullptr;
  }
  auto tok = tokenizer_from_gguf(*file);
  if (!tok || !tok->tokenizer) {
    ADD_FAILURE() << path << ": no tokenizer";
    return nullptr;
  }
  return index_vocabulary(vocabulary_bytes(*tok->tokenizer, tok->eos_ids));
}

TEST(TokenMask, Llama3VocabularyMatchesBruteForce) {
  const std::string path = test::shared_model_path("tiny-llama3-q4_k_m.gguf");
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " is missing: the Llama 3 vocabulary test needs it";
  const auto vocab = vocabulary_of(path);
  ASSERT_TRUE(vocab);
  ASSERT_GT(vocab->vocab_size(), 128000);
  auto g = compile(testing::json_grammar(), vocab);
  ASSERT_TRUE(g) << g.error().message;
  Matcher m(*g);
  // States: the start, inside a key, after a key, inside an escape, in a
  // number, in a nested array, in a string with UTF-8, after the object.
  for (std::string_view piece : {"", "{\"na", "me\"", " : ", "[1", "2.5e", "+3", ", \"x\\", "u00e", "9 \xC3",
                                 "\xA9\"", ", {", "}]", "}"}) {
    ASSERT_TRUE(m.accept_bytes(piece)) << piece;
    const auto got = mask_of(m);
    const auto want = brute_force_mask(m);
    ASSERT_EQ(got, want) << "after '" << piece << "':" << mask_difference(got, want, *vocab);
  }
  EXPECT_TRUE(m.can_end());
}

// Near a string's maxLength most tokens leave the string part way: the
// masks keep them only where a quote follows.
void bounded_strings_match_brute_force(const char* file_name) {
  const std::string path = test::shared_model_path(file_name);
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " is missing: the vocabulary test needs it";
  const auto vocab = vocabulary_of(path);
  ASSERT_TRUE(vocab);
  auto schema = grammar_from_json_schema(R"({"type": "object", "properties": {
      "a": {"type": "string", "maxLength": 5}, "b": {"type": "string", "minLength": 2, "maxLength": 9},
      "c": {"type": "array", "items": {"type": "string", "maxLength": 3}, "maxItems": 2}},
      "required": ["a", "b", "c"], "additionalProperties": false})");
  ASSERT_TRUE(schema) << schema.error().message;
  auto g = compile(std::move(*schema), vocab);
  ASSERT_TRUE(g) << g.error().message;
  Matcher m(*g);
  for (std::string_view piece : {"{\"a\":\"", "abc", "d", "\", \"b\": \"", "x", "\xC3\xA9\\", "n1234",
                                 "5", "\", \"c\": [\"", "ab", "\",\"", "\"]"}) {
    ASSERT_TRUE(m.accept_bytes(piece)) << piece;
    const auto got = mask_of(m);
    const auto want = brute_force_mask(m);
    ASSERT_EQ(got, want) << "after '" << piece << "':" << mask_difference(got, want, *vocab);
  }
  ASSERT_TRUE(m.accept_bytes("}"));
  EXPECT_TRUE(m.can_end());
  // On Llama 3's vocabulary, 26 MB of suffixes when they were kept whatever
  // their first byte, 2.6 MB now (most of it a JSON character's rule, which
  // a character may follow).
  EXPECT_LT((*g)->cache_stats().suffix_bytes, size_t(8) << 20) << "suffixes no caller takes were kept";
}

TEST(TokenMask, Llama3VocabularyMatchesBruteForceInBoundedStrings) {
  bounded_strings_match_brute_force("tiny-llama3-q4_k_m.gguf");
}

TEST(TokenMask, Qwen2VocabularyMatchesBruteForceInBoundedStrings) {
  bounded_strings_match_brute_force("tiny-qwen2-q4_k_m.gguf");
}

}  // namespace
}  // namespace conveyor::grammar
