// The constraint compiler: a constraint compiled once per distinct ask, the
// cache bounded by count and by the bytes of the grammars' masks, refusals
// kept apart, and errors that name the request field.
#include "http/constraint_compiler.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

#include "grammar/matcher.hpp"
#include "grammar/regex.hpp"
#include "http/metrics_text.hpp"
#include "tests/http/constraint_fixtures.hpp"

namespace conveyor::http {
namespace {

using testing::binder;
using testing::regex;

TEST(ConstraintCompiler, CompilesEachAskOnceAndSharesIt) {
  ConstraintCompiler compiler(binder());
  auto a = compiler.compile(regex("[a-z]{3}"));
  auto b = compiler.compile(regex("[a-z]{3}"));
  ASSERT_TRUE(std::holds_alternative<GrammarConstraint>(a));
  EXPECT_EQ(std::get<GrammarConstraint>(a).compiled, std::get<GrammarConstraint>(b).compiled);
  EXPECT_EQ(compiler.figures().compiled, 1u);
  EXPECT_EQ(compiler.figures().hits, 1u);
  OutputConstraint loose = regex("[a-z]{3}");
  loose.kind = OutputConstraint::Kind::grammar;  // the same text as GBNF is another ask
  loose.source = "root ::= [a-z] [a-z] [a-z]";
  ASSERT_TRUE(std::holds_alternative<GrammarConstraint>(compiler.compile(loose)));
  EXPECT_EQ(compiler.figures().compiled, 2u);
}

// A server's planning threads never compile (ServerState::plan): in a
// MissesDeferred scope a cached grammar is served, a new one is refused and
// the scope says so; outside it the same ask compiles.
TEST(ConstraintCompiler, MissesInADeferringScopeAreRefusedAndNoted) {
  ConstraintCompiler compiler(binder());
  ASSERT_TRUE(std::holds_alternative<GrammarConstraint>(compiler.compile(regex("a+"))));
  {
    ConstraintCompiler::MissesDeferred misses;
    EXPECT_TRUE(std::holds_alternative<GrammarConstraint>(compiler.compile(regex("a+"))));
    EXPECT_FALSE(misses.deferred());
    auto refused = compiler.compile_grammar("key", [] { return grammar::grammar_from_regex("c+"); }, "tools");
    ASSERT_TRUE(std::holds_alternative<ApiError>(refused));
    EXPECT_EQ(std::get<ApiError>(refused).param, "tools");
    EXPECT_EQ(std::get<ApiError>(refused).code, "deferred");
    EXPECT_TRUE(misses.deferred());
  }
  {
    ConstraintCompiler::MissesDeferred outer;
    EXPECT_EQ(outer.expected_compile_time().count(), 0);
    std::chrono::nanoseconds small{};
    {
      ConstraintCompiler::MissesDeferred inner;  // a miss counts for the enclosing scopes too
      EXPECT_TRUE(std::holds_alternative<ApiError>(compiler.compile(regex("b+"))));
      EXPECT_TRUE(inner.deferred());
      small = inner.expected_compile_time();
      EXPECT_GT(small.count(), 0);
    }
    EXPECT_TRUE(outer.deferred());
    EXPECT_EQ(outer.expected_compile_time(), small);
    // The expected time grows with what was missed.
    (void)compiler.compile_grammar(std::string(4096, 'k'), [] { return grammar::grammar_from_regex("k+"); }, "tools");
    EXPECT_GT(outer.expected_compile_time(), 100 * small);
    // Other threads are not in the scope.
    std::thread([&] { EXPECT_TRUE(std::holds_alternative<GrammarConstraint>(compiler.compile(regex("d+")))); }).join();
  }
  EXPECT_EQ(compiler.figures().compiled, 2u);  // a+ and d+: nothing was compiled in the scope
  EXPECT_TRUE(std::holds_alternative<GrammarConstraint>(compiler.compile(regex("b+"))));
  EXPECT_EQ(compiler.figures().compiled, 3u);
}

TEST(ConstraintCompiler, TheCacheIsBoundedByCountAndBytes) {
  ConstraintCompiler two(binder(), /*cache_capacity=*/2);
  for (const char* p : {"a+", "b+", "c+"}) (void)two.compile(regex(p));
  (void)two.compile(regex("c+"));  // kept
  EXPECT_EQ(two.figures().compiled, 3u);
  (void)two.compile(regex("a+"));  // the least recent went
  EXPECT_EQ(two.figures().compiled, 4u);

  // Room for one small grammar and its first masks, not two: the least
  // recent goes; then one grammar whose masks pass the bound alone goes
  // too, the most recent included (its requests keep it; a single one could
  // pass the bound by far).
  size_t one = 0, filled = 0;  // x[0-9]+'s bytes before and after its first mask
  {
    ConstraintCompiler probe(binder());
    auto g = std::get<GrammarConstraint>(probe.compile(regex("x[0-9]+"))).compiled;
    one = g->memory_bytes();
    grammar::Matcher m(g);
    std::vector<uint64_t> mask(m.mask_words());
    m.fill_mask(mask);
    filled = g->memory_bytes();
  }
  ASSERT_LT(one, filled);
  ASSERT_LT(filled, 2 * one);
  const size_t bound = (one + filled) / 2;
  ConstraintCompiler tight(binder(), 64, /*cache_bytes=*/bound);
  auto first = std::get<GrammarConstraint>(tight.compile(regex("x[0-9]+")));
  EXPECT_EQ(tight.figures().grammars, 1u);
  (void)tight.compile(regex("y[0-9]+"));  // two grammars pass the bound: x goes
  EXPECT_EQ(tight.figures().grammars, 1u);
  (void)tight.compile(regex("x[0-9]+"));
  EXPECT_EQ(tight.figures().compiled, 3u);
  auto again = std::get<GrammarConstraint>(tight.compile(regex("x[0-9]+")));  // a hit, which it gives
  EXPECT_EQ(tight.figures().hits, 1u);
  EXPECT_TRUE(again.compiled);
  grammar::Matcher m(again.compiled);
  std::vector<uint64_t> mask(m.mask_words());
  m.fill_mask(mask);  // its masks take it past the bound
  ASSERT_GT(again.compiled->memory_bytes(), bound);
  (void)tight.compile(regex("x[0-9]+"));  // a hit again; past the bound alone, it then goes
  EXPECT_EQ(tight.figures().hits, 2u);
  EXPECT_EQ(tight.figures().grammars, 0u);
  (void)tight.compile(regex("x[0-9]+"));
  EXPECT_EQ(tight.figures().compiled, 4u);

  // A grammar's own rules count before any mask: nothing fits in no bytes.
  ConstraintCompiler none(binder(), 64, /*cache_bytes=*/0);
  (void)none.compile(regex("z+"));
  EXPECT_EQ(none.figures().grammars, 0u);
}

// What /metrics shows of the cache: its grammars, their bytes (the rules,
// the masks and the DFA: more once a mask was filled), its bound and counters.
TEST(ConstraintCompiler, FiguresAreWhatTheCacheHolds) {
  ConstraintCompiler compiler(binder(), 64, size_t(3) << 20);
  EXPECT_EQ(compiler.figures().grammars, 0u);
  auto a = std::get<GrammarConstraint>(compiler.compile(regex("x[0-9]+")));
  (void)compiler.compile(regex("x[0-9]+"));
  const size_t before = compiler.figures().bytes;
  grammar::Matcher m(a.compiled);
  std::vector<uint64_t> mask(m.mask_words());
  m.fill_mask(mask);
  const ConstraintCompiler::CacheFigures f = compiler.figures();
  EXPECT_EQ(f.grammars, 1u);
  EXPECT_GT(f.bytes, before);
  EXPECT_EQ(f.bytes, a.compiled->cache_stats().memory_bytes);
  EXPECT_EQ(f.max_bytes, size_t(3) << 20);
  EXPECT_EQ(f.compiled, 1u);
  EXPECT_EQ(f.hits, 1u);
  const std::string text = render_grammar_cache_metrics(f);
  EXPECT_NE(text.find("conveyor:grammar_cache_grammars 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("conveyor:grammar_cache_max_bytes 3145728\n"), std::string::npos) << text;
  EXPECT_NE(text.find("conveyor:grammars_compiled_total 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("conveyor:grammar_cache_hits_total 1\n"), std::string::npos) << text;
}

TEST(ConstraintCompiler, ErrorsNameTheField) {
  ConstraintCompiler compiler(binder());
  auto e = compiler.compile(regex("(?=x)"));
  ASSERT_TRUE(std::holds_alternative<ApiError>(e));
  EXPECT_EQ(std::get<ApiError>(e).param, "structured_outputs");
  EXPECT_EQ(std::get<ApiError>(e).message.rfind("structured_outputs: regex:", 0), 0u) << std::get<ApiError>(e).message;
  OutputConstraint schema;
  schema.kind = OutputConstraint::Kind::json_schema;
  schema.source = R"({"type": "integer", "multipleOf": 3})";
  schema.field = "response_format";
  auto s = compiler.compile(schema);
  ASSERT_TRUE(std::holds_alternative<ApiError>(s));
  EXPECT_NE(std::get<ApiError>(s).message.find("multipleOf"), std::string::npos);
  // vLLM's top-level json_schema field: its name once, not twice.
  schema.field = "json_schema";
  auto top = compiler.compile(schema);
  ASSERT_TRUE(std::holds_alternative<ApiError>(top));
  EXPECT_EQ(std::get<ApiError>(top).message.rfind("json_schema: keyword 'multipleOf'", 0), 0u)
      << std::get<ApiError>(top).message;
}

// GBNF's <[id]> is checked against the served vocabulary when it is bound.
TEST(ConstraintCompiler, ATokenReferenceMustNameATokenThatDoesNotEndTheText) {
  ConstraintCompiler compiler(binder());
  const int32_t eos = make_byte_tokenizer()->eos_id();
  OutputConstraint gbnf;
  gbnf.kind = OutputConstraint::Kind::grammar;
  gbnf.field = "grammar";
  for (const auto& [id, message] : {std::pair{std::to_string(1 << 20), "is not in the vocabulary"},
                                    std::pair{std::to_string(eos), "is an end token"}}) {
    gbnf.source = "root ::= \"a\" <[" + id + "]>";
    auto e = compiler.compile(gbnf);
    ASSERT_TRUE(std::holds_alternative<ApiError>(e)) << id;
    EXPECT_EQ(std::get<ApiError>(e).param, "grammar");
    EXPECT_NE(std::get<ApiError>(e).message.find("grammar token " + id + " " + message), std::string::npos)
        << std::get<ApiError>(e).message;
  }
  gbnf.source = "root ::= \"a\" <[98]>";  // b's token in the byte vocabulary, as a token
  auto ok = compiler.compile(gbnf);
  ASSERT_TRUE(std::holds_alternative<GrammarConstraint>(ok)) << std::get<ApiError>(ok).message;
  grammar::Matcher m(std::get<GrammarConstraint>(ok).compiled);
  ASSERT_TRUE(m.accept_bytes("a"));
  EXPECT_FALSE(grammar::Matcher(m).accept_bytes("b")) << "its text is not the token";
  EXPECT_TRUE(m.accept_token(98));
}

// GBNF's <think> is the vocabulary's token of that text.
TEST(ConstraintCompiler, ATokenReferenceByTextIsLookedUpInTheVocabulary) {
  Vocabulary v = byte_vocabulary(259);
  v.pieces[258] = "<think>";
  v.types[258] = TokenType::control;
  std::shared_ptr<const Tokenizer> tokenizer = make_bpe_tokenizer(v).value();
  ConstraintCompiler compiler(std::make_shared<GrammarBinder>(tokenizer, std::vector<int32_t>{tokenizer->eos_id()}));
  OutputConstraint gbnf;
  gbnf.kind = OutputConstraint::Kind::grammar;
  gbnf.field = "grammar";
  gbnf.source = "root ::= <think> \"a\"";
  auto ok = compiler.compile(gbnf);
  ASSERT_TRUE(std::holds_alternative<GrammarConstraint>(ok)) << std::get<ApiError>(ok).message;
  grammar::Matcher m(std::get<GrammarConstraint>(ok).compiled);
  EXPECT_FALSE(grammar::Matcher(m).accept_bytes("<think>"));
  ASSERT_TRUE(m.accept_token(258));
  EXPECT_TRUE(m.accept_bytes("a"));
  gbnf.source = "root ::= <thinking>";  // several tokens of text
  auto several = compiler.compile(gbnf);
  ASSERT_TRUE(std::holds_alternative<ApiError>(several));
  EXPECT_NE(std::get<ApiError>(several).message.find("'<thinking>' is not one token of the vocabulary"),
            std::string::npos)
      << std::get<ApiError>(several).message;
}

// An ask the compilers refuse is kept: asked again, it is answered without
// compiling, in a deferring scope too, naming the field it came from this
// time. Refusals are kept apart: many of them push no grammar out.
TEST(ConstraintCompiler, RefusalsAreKeptApartFromTheGrammars) {
  ConstraintCompiler constraints(binder(), /*cache_capacity=*/2);
  ASSERT_TRUE(std::holds_alternative<GrammarConstraint>(constraints.compile(regex("a+"))));
  OutputConstraint bad = regex("(unclosed");
  const auto first = constraints.compile(bad);
  ASSERT_TRUE(std::holds_alternative<ApiError>(first));
  EXPECT_EQ(std::get<ApiError>(first).status, 400);
  {
    ConstraintCompiler::MissesDeferred misses;
    bad.field = "response_format";
    const auto again = constraints.compile(bad);
    EXPECT_FALSE(misses.deferred());
    ASSERT_TRUE(std::holds_alternative<ApiError>(again));
    const ApiError& e = std::get<ApiError>(again);
    EXPECT_EQ(e.status, 400);
    EXPECT_EQ(e.param, "response_format");
    const std::string& before = std::get<ApiError>(first).message;
    EXPECT_EQ(e.message, "response_format" + before.substr(before.find(": ")));
  }
  for (int i = 0; i < 100; ++i) (void)constraints.compile(regex("(" + std::to_string(i)));
  const auto figures = constraints.figures();
  EXPECT_EQ(figures.grammars, 1u);
  EXPECT_EQ(figures.compiled, 1u);
  EXPECT_EQ(figures.hits, 0u);  // refusals are not grammars
  (void)constraints.compile(regex("a+"));
  EXPECT_EQ(constraints.figures().compiled, 1u);  // still kept
}

}  // namespace
}  // namespace conveyor::http
