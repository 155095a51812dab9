// The constraint compiler: a constraint compiled once per distinct ask, the
// cache bounded by count and by the bytes of the grammars' masks, errors
// that name the request field; and plan_in_lanes (http/plan_lanes.hpp): a
// request whose grammar the cache lacks is planned again on the compiling
// thread, the requests behind it go on meanwhile, and one no longer wanted
// is not compiled for no one.
#include "http/constraint_compiler.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "grammar/matcher.hpp"
#include "grammar/regex.hpp"
#include "http/metrics_text.hpp"
#include "http/plan_lanes.hpp"
#include "model/formats/dummy.hpp"

namespace conveyor::http {
namespace {

using namespace std::chrono_literals;

OutputConstraint regex(std::string pattern) {
  OutputConstraint c;
  c.kind = OutputConstraint::Kind::regex;
  c.source = std::move(pattern);
  c.field = "structured_outputs";
  return c;
}

std::shared_ptr<GrammarBinder> binder() {
  std::shared_ptr<const Tokenizer> bytes = make_byte_tokenizer();
  return std::make_shared<GrammarBinder>(bytes, std::vector<int32_t>{bytes->eos_id()});
}

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
    {
      ConstraintCompiler::MissesDeferred inner;  // the innermost scope notes it
      EXPECT_TRUE(std::holds_alternative<ApiError>(compiler.compile(regex("b+"))));
      EXPECT_TRUE(inner.deferred());
    }
    EXPECT_FALSE(misses.deferred());
    auto refused = compiler.compile_grammar("key", [] { return grammar::grammar_from_regex("c+"); }, "tools");
    ASSERT_TRUE(std::holds_alternative<ApiError>(refused));
    EXPECT_EQ(std::get<ApiError>(refused).param, "tools");
    EXPECT_TRUE(misses.deferred());
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

// ---- planning in two lanes (http/plan_lanes.hpp) ---------------------------------

// Waits for every job queued on `queue` so far (one thread: in order).
void drain(WorkQueue& queue) {
  std::promise<void> done;
  queue.submit([&done] { done.set_value(); });
  done.get_future().wait();
}

TEST(PlanLanes, AMissIsPlannedAgainOnTheCompilingThread) {
  WorkQueue planner(1), compiler(1);
  ConstraintCompiler constraints(binder());
  std::mutex mutex;
  std::vector<std::thread::id> runs;
  const auto plan = [&](std::string pattern) {
    std::promise<std::pair<bool, std::thread::id>> delivered;
    auto future = delivered.get_future();
    plan_in_lanes(
        planner, compiler,
        [&, pattern] {
          std::lock_guard lock(mutex);
          runs.push_back(std::this_thread::get_id());
          return constraints.compile(regex(pattern));
        },
        [] { return true; },
        [&delivered](ConstraintResult r) {
          delivered.set_value({std::holds_alternative<GrammarConstraint>(r), std::this_thread::get_id()});
        });
    return future.get();
  };
  const auto [compiled, on] = plan("a+");
  EXPECT_TRUE(compiled);
  ASSERT_EQ(runs.size(), 2u);  // planned, deferred, planned again
  EXPECT_NE(runs[0], runs[1]);
  EXPECT_EQ(on, runs[1]);
  EXPECT_EQ(constraints.figures().compiled, 1u);
  runs.clear();
  const auto [again, on_planner] = plan("a+");  // cached: planned once, on the planning thread
  EXPECT_TRUE(again);
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(on_planner, runs[0]);
  EXPECT_EQ(constraints.figures().compiled, 1u);
}

TEST(PlanLanes, ALongCompileHoldsUpNoOneAndAWithdrawnRequestIsNotCompiled) {
  WorkQueue planner(1), compiler(1);
  ConstraintCompiler constraints(binder());
  std::promise<void> compiling, release;
  std::shared_future<void> released = release.get_future().share();
  struct Release {  // a failed assertion still frees the compiling thread (the queues' destructors join it)
    std::promise<void>& promise;
    bool done = false;
    void operator()() {
      done = true;
      promise.set_value();
    }
    ~Release() {
      if (!done) promise.set_value();
    }
  } let_go{release};
  std::promise<bool> slow_done;
  plan_in_lanes(
      planner, compiler,
      [&] {
        return constraints.compile_grammar(
            "slow",
            [&] {
              compiling.set_value();
              released.wait();  // the compiling thread is busy until the test says
              return grammar::grammar_from_regex("s+");
            },
            "tools");
      },
      [] { return true; }, [&](ConstraintResult r) { slow_done.set_value(std::holds_alternative<GrammarConstraint>(r)); });
  compiling.get_future().wait();

  // A plain request behind it is planned and delivered meanwhile.
  std::promise<int> plain;
  plan_in_lanes(planner, compiler, [] { return 7; }, [] { return true; }, [&](int v) { plain.set_value(v); });
  auto plain_done = plain.get_future();
  ASSERT_EQ(plain_done.wait_for(60s), std::future_status::ready);
  EXPECT_EQ(plain_done.get(), 7);

  // A request with another new grammar waits for the compiling thread; its
  // client goes meanwhile: it is not compiled, nor delivered.
  std::atomic<bool> wanted{true};
  std::atomic<int> planned{0};
  std::atomic<bool> delivered{false};
  std::promise<void> deferred;
  plan_in_lanes(
      planner, compiler,
      [&] {
        if (planned++ == 0) deferred.set_value();
        return constraints.compile(regex("c+"));
      },
      [&] { return wanted.load(); }, [&](ConstraintResult) { delivered = true; });
  deferred.get_future().wait();
  drain(planner);
  wanted = false;
  let_go();
  auto slow = slow_done.get_future();
  ASSERT_EQ(slow.wait_for(60s), std::future_status::ready);
  EXPECT_TRUE(slow.get());
  drain(compiler);
  EXPECT_EQ(planned.load(), 1);  // on the planning thread only
  EXPECT_FALSE(delivered);
  EXPECT_EQ(constraints.figures().compiled, 1u);  // the slow one alone
}

TEST(PlanLanes, ARequestNotWantedIsNotPlanned) {
  WorkQueue planner(1), compiler(1);
  std::atomic<int> runs{0};
  plan_in_lanes(planner, compiler, [&] { return ++runs; }, [] { return false; }, [](int) { FAIL(); });
  drain(planner);
  drain(compiler);
  EXPECT_EQ(runs.load(), 0);
}

// An ask the compilers refuse is kept: asked again, it is answered on the
// planning thread, naming the field it came from this time.
TEST(PlanLanes, ARefusalIsKeptAndAnsweredWithoutTheCompilingThread) {
  ConstraintCompiler constraints(binder());
  OutputConstraint bad = regex("(unclosed");
  const auto first = constraints.compile(bad);
  ASSERT_TRUE(std::holds_alternative<ApiError>(first));
  EXPECT_EQ(std::get<ApiError>(first).status, 400);
  ConstraintCompiler::MissesDeferred misses;
  bad.field = "response_format";
  const auto again = constraints.compile(bad);
  EXPECT_FALSE(misses.deferred());
  ASSERT_TRUE(std::holds_alternative<ApiError>(again));
  const ApiError& e = std::get<ApiError>(again);
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.param, "response_format");
  EXPECT_TRUE(e.message.starts_with("response_format: ")) << e.message;
  EXPECT_EQ(e.message.substr(e.message.find(": ")), std::get<ApiError>(first).message.substr(
                                                         std::get<ApiError>(first).message.find(": ")));
  EXPECT_EQ(constraints.figures().grammars, 0u);  // a refusal is no grammar
  EXPECT_EQ(constraints.figures().hits, 1u);
}

}  // namespace
}  // namespace conveyor::http
