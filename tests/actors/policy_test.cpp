// Policies written outside the library (actors/policy_actors.hpp): typed
// actors defined in this file, plugged into a whole engine on the fake
// backend by handle and by registered name. Each run's tokens are compared
// with the default policies' run of the same requests: a policy decides when
// a request runs, never what it produces, so a policy that loses, repeats or
// corrupts a request cannot pass. Then the failures: a policy killed
// mid-run, one that never answers, one that answers with an error; each is
// replaced by the built-in, logged once, and every stream completes exactly.
// Last, the tenant-share policy of examples/tenant_share.cpp, as a rule.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>

#include "actors/engine.hpp"
#include "actors/policy_actors.hpp"
#include "actors/policy_registry.hpp"
#include "examples/tenant_share_policy.hpp"
#include "tests/actors/engine_test_util.hpp"
#include "tests/actors/fake_engine.hpp"

namespace conveyor::testing {
namespace {

using namespace std::chrono_literals;

// ---- policies of a user's own ----------------------------------------------------

// What the test's policies share with the test: how many questions they answered.
struct Answered {
  std::atomic<int> count{0};
};

// Admits the head of the queue only, and only into room enough for all of
// it (prompt + max_tokens): many questions, one request each.
AdmissionDecision one_at_a_time(const AdmissionQuery& q) {
  AdmissionDecision d;
  if (q.candidates.empty() || q.num_running >= q.max_running) return d;
  const AdmissionCandidate& c = q.candidates.front();
  const int32_t need = (c.prompt_tokens + c.max_tokens * c.num_samples + q.block_size - 1) / q.block_size +
                       c.num_samples - 1;
  if (need <= q.free_blocks - q.reserved_blocks || q.num_running == 0) {
    d.admitted.push_back(c.id);
    d.footprints.push_back(need);
  }
  return d;
}

admission_actor::behavior_type one_at_a_time_policy(admission_actor::pointer,
                                                    std::shared_ptr<Answered> answered) {
  return {
      [answered](admit_atom, const AdmissionQuery& q) {
        ++answered->count;
        return one_at_a_time(q);
      },
      [](finished_atom, int32_t) {},
  };
}

// Takes every question and never answers it (the promises are kept, so CAF
// sends no error either): only the scheduler's time limit ends the wait.
struct silent_state {
  std::vector<caf::typed_response_promise<AdmissionDecision>> kept;
};
admission_actor::behavior_type silent_policy(admission_actor::stateful_pointer<silent_state> self,
                                             std::shared_ptr<Answered> asked) {
  return {
      [self, asked](admit_atom, const AdmissionQuery&) -> caf::result<AdmissionDecision> {
        ++asked->count;
        auto promise = self->make_response_promise<AdmissionDecision>();
        self->state.kept.push_back(promise);
        return promise;
      },
      [](finished_atom, int32_t) {},
  };
}

// Answers its first `answers` questions as one_at_a_time does, then keeps
// the next one unanswered: killed then, it dies with a question pending.
struct stalling_state {
  std::vector<caf::typed_response_promise<AdmissionDecision>> kept;
};
admission_actor::behavior_type stalling_policy(admission_actor::stateful_pointer<stalling_state> self, int answers,
                                               std::shared_ptr<Answered> asked) {
  return {
      [self, answers, asked](admit_atom, const AdmissionQuery& q) -> caf::result<AdmissionDecision> {
        if (++asked->count <= answers) return one_at_a_time(q);
        auto promise = self->make_response_promise<AdmissionDecision>();
        self->state.kept.push_back(promise);
        return promise;
      },
      [](finished_atom, int32_t) {},
  };
}

// Answers every preemption question with an error.
preemption_actor::behavior_type failing_preemption(preemption_actor::pointer, std::shared_ptr<Answered> asked) {
  return {
      [asked](preempt_atom, const PreemptionQuery&) -> caf::result<PreemptionDecision> {
        ++asked->count;
        return make_engine_error(Error{Errc::internal, "this policy always fails"});
      },
      [](costs_atom, double, double) {},
  };
}

// Answers every preemption question, naming no victim.
preemption_actor::behavior_type victimless_preemption(preemption_actor::pointer, std::shared_ptr<Answered> asked) {
  return {
      [asked](preempt_atom, const PreemptionQuery&) -> PreemptionDecision {
        ++asked->count;
        return {};
      },
      [](costs_atom, double, double) {},
  };
}

// ---- the log ------------------------------------------------------------------------

// Keeps the default logger's warnings (the scheduler's fallback lines).
class KeptLines : public spdlog::sinks::base_sink<std::mutex> {
 public:
  std::vector<std::string> take() {
    std::lock_guard lock(mutex_);
    return std::exchange(lines_, {});
  }

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    lines_.emplace_back(msg.payload.data(), msg.payload.size());
  }
  void flush_() override {}

 private:
  std::vector<std::string> lines_;
};

std::shared_ptr<KeptLines> log_lines() {
  static std::shared_ptr<KeptLines> sink = [] {
    auto s = std::make_shared<KeptLines>();
    spdlog::default_logger()->sinks().push_back(s);
    return s;
  }();
  return sink;
}

int count_containing(const std::vector<std::string>& lines, const std::string& a, const std::string& b) {
  int n = 0;
  for (const std::string& l : lines) n += l.find(a) != std::string::npos && l.find(b) != std::string::npos;
  return n;
}

// ---- the runs ----------------------------------------------------------------------

// Few slots, so that admission is asked many times.
EngineConfig busy_config() {
  EngineConfig c;
  c.block_size = 4;
  c.kv_cache_tokens = 4 * 256;
  c.max_num_seqs = 4;
  c.max_batched_tokens = 64;
  c.prefill_chunk = 16;
  return c;
}

std::vector<std::vector<int32_t>> prompts(int n) {
  std::vector<std::vector<int32_t>> out;
  for (int i = 0; i < n; ++i) {
    std::vector<int32_t> p;
    for (int t = 0; t < 5 + i % 7; ++t) p.push_back(1 + (i * 13 + t * 7) % (kFakeVocab - 1));
    out.push_back(std::move(p));
  }
  return out;
}

constexpr int32_t kMaxTokens = 24;

// Every request ran to its length, with the tokens of the reference run.
void expect_same_outcomes(const std::map<request_id, Outcome>& got, const std::map<request_id, Outcome>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (const auto& [id, w] : want) {
    const Outcome& g = got.at(id);
    EXPECT_EQ(g.finals, 1) << "request " << id;
    EXPECT_EQ(g.finish, FinishReason::length) << "request " << id << ": " << g.message;
    EXPECT_EQ(g.tokens, w.tokens) << "request " << id;
  }
}

std::map<request_id, Outcome> reference(const EngineConfig& config, int n) {
  caf::actor_system_config cfg;
  add_engine_types(cfg);
  caf::actor_system sys{cfg};
  auto engine = make_fake_engine(sys, config);
  auto out = run_greedy(*engine, prompts(n), kMaxTokens, /*ignore_eos=*/true);
  for (const auto& [id, o] : out) EXPECT_EQ(o.finish, FinishReason::length) << o.message;
  return out;
}

TEST(UserPolicy, PluggedInByHandleRunsEveryRequestExactly) {
  const auto want = reference(busy_config(), 12);
  EngineSystemConfig cfg;
  caf::actor_system sys{cfg};
  auto engine = make_fake_engine(sys, busy_config());
  auto answered = std::make_shared<Answered>();
  ASSERT_TRUE(engine->set_admission_policy(sys.spawn(one_at_a_time_policy, answered)));
  expect_same_outcomes(run_greedy(*engine, prompts(12), kMaxTokens, true), want);
  // One request per answer, at least: the policy made every admission.
  EXPECT_GE(answered->count.load(), 12);
  EXPECT_FALSE(engine->set_admission_policy(admission_actor{}));
  expect_all_blocks_free(*engine);
}

TEST(UserPolicy, KilledMidRunFallsBackToTheBuiltinAndEveryStreamCompletes) {
  const auto want = reference(busy_config(), 24);
  log_lines()->take();
  EngineSystemConfig cfg;
  caf::actor_system sys{cfg};
  auto engine = make_fake_engine(sys, busy_config());
  auto asked = std::make_shared<Answered>();
  admission_actor policy = sys.spawn(stalling_policy, 3, asked);
  ASSERT_TRUE(engine->set_admission_policy(policy));
  Collector collector;
  const auto ps = prompts(24);
  for (size_t i = 0; i < ps.size(); ++i)
    engine->submit(greedy_spec(i + 1, ps[i], kMaxTokens, true), collector.callback_for(i + 1));
  // Killed with its fourth question pending: three requests admitted, 21 waiting.
  for (int i = 0; i < 5000 && asked->count.load() < 4; ++i) std::this_thread::sleep_for(1ms);
  ASSERT_EQ(asked->count.load(), 4);
  caf::anon_send_exit(policy, caf::exit_reason::kill);
  ASSERT_TRUE(collector.wait_for(ps.size()));
  expect_same_outcomes(collector.outcomes(), want);
  EXPECT_EQ(asked->count.load(), 4) << "asked nothing after its death";
  const auto lines = log_lines()->take();
  EXPECT_EQ(count_containing(lines, "admission policy", "the built-in watermark policy answers"), 1)
      << (lines.empty() ? "no log line" : lines.front());
  expect_all_blocks_free(*engine);
}

TEST(UserPolicy, OneThatNeverAnswersIsReplacedAfterTheTimeout) {
  EngineConfig config = busy_config();
  config.policy_timeout_seconds = 0.05;
  const auto want = reference(config, 8);
  log_lines()->take();
  EngineSystemConfig cfg;
  caf::actor_system sys{cfg};
  auto engine = make_fake_engine(sys, config);
  auto asked = std::make_shared<Answered>();
  ASSERT_TRUE(engine->set_admission_policy(sys.spawn(silent_policy, asked)));
  const auto start = std::chrono::steady_clock::now();
  expect_same_outcomes(run_greedy(*engine, prompts(8), kMaxTokens, true), want);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(asked->count.load(), 1) << "asked once, then replaced for good";
  EXPECT_GE(seconds, 0.05) << "the scheduler waited out the time limit";
  const auto lines = log_lines()->take();
  EXPECT_EQ(count_containing(lines, "admission policy", "no answer within 50 ms"), 1)
      << (lines.empty() ? "no log line" : lines.front());
}

// Runs 16 requests that must preempt under a preemption policy of `behavior`
// (given the questions' counter): every request ends exactly as under the
// default policies, one warning line names the policy's failure (`failure`)
// and every block is free after; how often it was asked.
template <class Behavior>
int run_under_failing_preemption(Behavior behavior, const std::string& failure) {
  const EngineConfig config = swap_pressure_config();
  const auto want = reference(config, 16);
  log_lines()->take();
  EngineSystemConfig cfg;
  caf::actor_system sys{cfg};
  // Held until all 16 are in: submitted over a few iterations (a busy
  // machine), the first ones could end before the last start, and nothing
  // would preempt.
  std::shared_ptr<GatedRunner> gate;
  auto engine = make_fake_engine(sys, config, false, nullptr, gated(gate));
  auto asked = std::make_shared<Answered>();
  EXPECT_TRUE(engine->set_preemption_policy(sys.spawn(behavior, asked)));
  expect_same_outcomes(run_greedy(*engine, prompts(16), kMaxTokens, true, [&gate] { gate->open(); }), want);
  auto stats = engine->stats();
  EXPECT_TRUE(stats && stats->preemptions_swap + stats->preemptions_recompute > 0)
      << "the pool was meant to force preemption";
  const auto lines = log_lines()->take();
  EXPECT_EQ(count_containing(lines, "preemption policy", failure), 1) << (lines.empty() ? "no log line" : lines.front());
  expect_all_blocks_free(*engine);
  return asked->count.load();
}

TEST(UserPolicy, APreemptionPolicyThatErrsIsReplacedAndNothingIsLost) {
  EXPECT_EQ(run_under_failing_preemption(failing_preemption, "this policy always fails"), 1);
}

// Too few victims is allowed (the short sequences sit the iteration out),
// but none while every running sequence is short would stall the engine for
// good (it asked again and again, 300,000 times a second, and cancels never
// took effect): that answer is a failure, and the built-in takes over.
TEST(UserPolicy, APreemptionPolicyThatNamesNoVictimsCannotStallTheEngine) {
  const int asked = run_under_failing_preemption(victimless_preemption, "preempted no sequence");
  EXPECT_GE(asked, 1);
  EXPECT_LT(asked, 1000) << "asked once an iteration at most while it could not stall";
}

// ---- the registry ------------------------------------------------------------------

TEST(PolicyRegistry, ARegisteredNameIsUsableByConfigAndAtRunTime) {
  // The registry is the process's: registered once, whatever --gtest_repeat says.
  static auto answered = std::make_shared<Answered>();
  static const Status registered =
      register_admission_policy("test-one-at-a-time", [](caf::actor_system& sys, const EngineConfig&) {
        return sys.spawn(one_at_a_time_policy, answered);
      });
  ASSERT_TRUE(registered) << registered.error().message;
  answered->count = 0;
  EXPECT_TRUE(has_admission_policy("test-one-at-a-time"));
  const auto names = admission_policy_names();
  ASSERT_GE(names.size(), 4u);
  EXPECT_EQ(names[0], "conservative");
  EXPECT_EQ(names.back(), "test-one-at-a-time");
  // Taken, empty, odd and factory-less registrations are refused.
  EXPECT_FALSE(register_admission_policy("test-one-at-a-time", [](caf::actor_system& sys, const EngineConfig&) {
    return sys.spawn(one_at_a_time_policy, std::make_shared<Answered>());
  }));
  EXPECT_FALSE(register_admission_policy("watermark", [](caf::actor_system& sys, const EngineConfig&) {
    return sys.spawn(one_at_a_time_policy, std::make_shared<Answered>());
  }));
  EXPECT_FALSE(register_admission_policy("", [](caf::actor_system& sys, const EngineConfig&) {
    return sys.spawn(one_at_a_time_policy, std::make_shared<Answered>());
  }));
  EXPECT_FALSE(register_admission_policy("a b", [](caf::actor_system& sys, const EngineConfig&) {
    return sys.spawn(one_at_a_time_policy, std::make_shared<Answered>());
  }));
  EXPECT_FALSE(register_preemption_policy("no-factory", {}));

  const auto want = reference(busy_config(), 6);
  EngineSystemConfig cfg;
  caf::actor_system sys{cfg};
  // By config, from the start.
  EngineConfig config = busy_config();
  config.admission_policy = "test-one-at-a-time";
  auto engine = make_fake_engine(sys, config);
  expect_same_outcomes(run_greedy(*engine, prompts(6), kMaxTokens, true), want);
  EXPECT_GE(answered->count.load(), 6);
  // At run time, by name, on an engine that started with the built-in.
  answered->count = 0;
  auto other = make_fake_engine(sys, busy_config());
  ASSERT_TRUE(other->set_admission_policy("test-one-at-a-time"));
  expect_same_outcomes(run_greedy(*other, prompts(6), kMaxTokens, true), want);
  EXPECT_GE(answered->count.load(), 6);
  // Built-ins by name too; an unknown name is an error naming the choices.
  EXPECT_TRUE(other->set_admission_policy("profiled"));
  EXPECT_TRUE(other->set_preemption_policy("swap"));
  const Status unknown = other->set_admission_policy("nope");
  ASSERT_FALSE(unknown);
  EXPECT_NE(unknown.error().message.find("test-one-at-a-time"), std::string::npos) << unknown.error().message;
  EngineConfig bad = busy_config();
  bad.preemption_policy = "nope";
  EXPECT_FALSE(Engine::create(sys, bad, ModelInfo{}, nullptr, nullptr).has_value());
}

// What a built-in's answer takes, through the actor, for the default time
// limit's sake (docs/engine.md quotes it): a queue of 64 candidates.
TEST(PolicyRegistry, ABuiltinAnswersFarWithinTheDefaultTimeLimit) {
  EngineSystemConfig cfg;
  caf::actor_system sys{cfg};
  auto policy = make_admission_actor("watermark", sys, EngineConfig{});
  ASSERT_TRUE(policy);
  AdmissionQuery q;
  q.total_blocks = q.free_blocks = 4096;
  q.max_running = 256;
  for (uint64_t i = 0; i < 64; ++i) q.candidates.push_back({i + 1, 200, 256, 0, i, 1, "t" + std::to_string(i % 4)});
  caf::scoped_actor self{sys};
  std::vector<double> micros;
  for (int i = 0; i < 2000; ++i) {
    const auto start = std::chrono::steady_clock::now();
    self->request(*policy, caf::infinite, admit_atom_v, q).receive([](const AdmissionDecision&) {},
                                                                  [](caf::error&) { FAIL(); });
    micros.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(micros.begin(), micros.end());
  const double median = micros[micros.size() / 2], p99 = micros[micros.size() * 99 / 100];
  std::printf("built-in watermark answer, 64 candidates: median %.1f us, p99 %.1f us, max %.1f us\n", median, p99,
              micros.back());
  EXPECT_LT(p99, 1e6 * EngineConfig{}.policy_timeout_seconds);
  self->send_exit(*policy, caf::exit_reason::user_shutdown);
}

// ---- the tenant-share rule (examples/tenant_share_policy.hpp) ------------------------

AdmissionCandidate candidate(uint64_t id, std::string tenant, int32_t prompt = 16, int32_t max_tokens = 48) {
  AdmissionCandidate c;
  c.id = id;
  c.prompt_tokens = prompt;
  c.max_tokens = max_tokens;
  c.arrival = id;
  c.tenant = std::move(tenant);
  return c;
}

// 100 blocks of 16 tokens; each default candidate may grow to 4 blocks.
AdmissionQuery tenant_query() {
  AdmissionQuery q;
  q.total_blocks = 100;
  q.free_blocks = 100;
  q.block_size = 16;
  q.max_running = 64;
  return q;
}

TEST(TenantShare, ATenantAtItsShareWaitsWhileOthersGoAhead) {
  examples::TenantShare rule{0.5};
  AdmissionQuery q = tenant_query();
  q.num_running = 12;
  q.free_blocks = 60;
  q.tenants = {{"alice", 40, 10}, {"bob", 4, 2}};
  q.candidates = {candidate(1, "alice"), candidate(2, "alice"), candidate(3, "bob"), candidate(4, "alice"),
                  candidate(5, "alice")};
  // alice: 40 + 4 + 4 = 48 <= 50, the next 4 would make 52: 4 and 5 wait, bob goes.
  const AdmissionDecision d = rule(q);
  EXPECT_EQ(d.admitted, (std::vector<uint64_t>{1, 2, 3}));
  EXPECT_EQ(d.footprints, (std::vector<int32_t>{4, 4, 4}));
  EXPECT_TRUE(d.rejected.empty());
}

TEST(TenantShare, ATenantHoldingNothingStartsOneRequestLargerThanItsShare) {
  examples::TenantShare rule{0.1};  // 10 blocks
  AdmissionQuery q = tenant_query();
  q.candidates = {candidate(1, "alice", 200, 100), candidate(2, "alice", 16, 16)};  // 19 blocks, then 2
  const AdmissionDecision d = rule(q);
  EXPECT_EQ(d.admitted, (std::vector<uint64_t>{1}));  // the second would pass 10 blocks: it waits
}

TEST(TenantShare, MemoryStopsTheWalkAndHopelessPromptsAreRefused) {
  examples::TenantShare rule{1.0};
  AdmissionQuery q = tenant_query();
  q.num_running = 1;
  q.free_blocks = 10;
  q.reserved_blocks = 2;
  q.tenants = {{"bob", 1, 1}};
  q.candidates = {candidate(1, "bob", 100 * 16), candidate(2, "bob"), candidate(3, "bob"), candidate(4, "carol")};
  // 1: its prompt alone is larger than the cache; 2 and 3 take 8 of the 8
  // left; 4 does not fit and stops the walk.
  const AdmissionDecision d = rule(q);
  ASSERT_EQ(d.rejected.size(), 1u);
  EXPECT_EQ(d.rejected[0].first, 1u);
  EXPECT_EQ(d.admitted, (std::vector<uint64_t>{2, 3}));
}

TEST(TenantShare, UntenantedRequestsAreNotCappedAndMaxRunningStopsTheWalk) {
  examples::TenantShare rule{0.05};  // 5 blocks
  AdmissionQuery q = tenant_query();
  q.num_running = 2;
  q.max_running = 5;
  q.tenants = {{"", 30, 2}};
  q.candidates = {candidate(1, ""), candidate(2, ""), candidate(3, ""), candidate(4, "")};
  const AdmissionDecision d = rule(q);
  EXPECT_EQ(d.admitted, (std::vector<uint64_t>{1, 2, 3}));  // 2 running + 3 = max_running
}

}  // namespace
}  // namespace conveyor::testing
