// Faults inside the engine (engine/fault_injection.hpp): the executor throws,
// a swap copy fails, a KV allocation fails. The engine restarts its workers
// and recomputes what was running: nothing hangs, every request gets exactly
// one final event, and the outputs equal an undisturbed run; a request the
// engine gives up on ends with Errc::internal, never invalid_argument.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>
#include <thread>

#include "engine/fault_injection.hpp"
#include "tests/actors/engine_test_util.hpp"
#include "tests/actors/fake_backend.hpp"
#include "tests/actors/fake_engine.hpp"
#include "tests/actors/stories_fixture.hpp"

namespace conveyor {
namespace {

using testing::Collector;
using testing::EngineSystemConfig;
using testing::Outcome;

constexpr int32_t kVocab = testing::kFakeVocab;
constexpr int32_t kContext = testing::kFakeContext;
using testing::make_fake_engine;

// A pool small enough that swapping happens.
EngineConfig pressured(const std::string& faults) {
  EngineConfig c = testing::swap_pressure_config();
  c.fault_injection = faults;
  return c;
}

using testing::expect_all_blocks_free;

// Runs the prompts greedily and checks every output against the fake model.
// A request may be in every restart: allow as many retries as there are faults.
void expect_recovered(const std::string& faults, uint64_t min_restarts, bool pipelined = false) {
  EngineSystemConfig cfg;
  caf::actor_system sys{cfg};
  EngineConfig config = pressured(faults);
  config.max_fault_retries = int32_t(min_restarts);
  auto engine = make_fake_engine(sys, config, pipelined);
  const auto prompts = testing::random_prompts(120, kVocab, 5);
  auto outcomes = testing::run_greedy(*engine, prompts, 30);
  ASSERT_EQ(outcomes.size(), prompts.size()) << faults;
  for (size_t i = 0; i < prompts.size(); ++i) {
    const Outcome& o = outcomes.at(i + 1);
    EXPECT_EQ(o.finals, 1) << faults << ", request " << i + 1;
    EXPECT_NE(o.finish, FinishReason::error) << faults << ": " << o.message;
    EXPECT_EQ(o.tokens, testing::expected_tokens(prompts[i], kVocab, 30, std::vector<int32_t>{0}, kContext))
        << faults << ", request " << i + 1;
  }
  EXPECT_GE(engine->metrics().restarts.load(), min_restarts) << faults;
  EXPECT_FALSE(engine->metrics().restarting.load());
  expect_all_blocks_free(*engine);
}

TEST(EngineFaults, ExecutorThrowingAtAnyStepIsRecomputed) {
  for (int step : {1, 2, 3, 7, 20, 45}) expect_recovered("executor=" + std::to_string(step), 1);
}

// A pipelined runner's fault also fails the step launched before it.
TEST(EngineFaults, PipelinedExecutorThrowingAtAnyStepIsRecomputed) {
  for (int step : {1, 2, 3, 20}) expect_recovered("executor=" + std::to_string(step), 1, /*pipelined=*/true);
  expect_recovered("executor=10,swap=2,alloc=17", 3, /*pipelined=*/true);
}

TEST(EngineFaults, FailedSwapCopyIsRecomputed) {
  for (int n : {1, 4}) expect_recovered("swap=" + std::to_string(n), 1);
}

TEST(EngineFaults, FailedKvAllocationIsRecomputed) {
  for (int n : {1, 5, 30}) expect_recovered("alloc=" + std::to_string(n), 1);
}

TEST(EngineFaults, SeveralFaultsOfEachKind) {
  expect_recovered("executor=10,swap=2,alloc=17", 3);
}

// A fault at every step: each request is retried max_fault_retries times,
// then ends with an engine error; nothing hangs, and the engine still runs.
TEST(EngineFaults, PersistentFaultEndsRequestsWithAnEngineError) {
  EngineSystemConfig cfg;
  caf::actor_system sys{cfg};
  EngineConfig config = pressured("executor=1+");
  config.max_fault_retries = 2;
  auto engine = make_fake_engine(sys, config);
  const auto prompts = testing::random_prompts(20, kVocab, 9);
  auto outcomes = testing::run_greedy(*engine, prompts, 10);
  ASSERT_EQ(outcomes.size(), prompts.size());
  for (const auto& [id, o] : outcomes) {
    EXPECT_EQ(o.finals, 1) << id;
    EXPECT_EQ(o.finish, FinishReason::error) << id;
    EXPECT_EQ(o.error_code, Errc::internal) << id;
    EXPECT_NE(o.message.find("the engine failed: executor: injected fault"), std::string::npos) << o.message;
    EXPECT_NE(o.message.find("restarted 2 times"), std::string::npos) << o.message;
  }
  EXPECT_GE(engine->metrics().restarts.load(), 3u);
  EXPECT_TRUE(engine->stats().has_value()) << "the scheduler must still answer";
  expect_all_blocks_free(*engine);
}

// fault_recovery = fail: what was running ends with an engine error at the
// fault; what was still waiting lost nothing and completes.
TEST(EngineFaults, FailModeEndsRunningRequestsOnly) {
  EngineSystemConfig cfg;
  caf::actor_system sys{cfg};
  EngineConfig config = pressured("executor=3");
  config.fault_recovery = FaultRecovery::fail;
  config.max_num_seqs = 4;
  auto engine = make_fake_engine(sys, config);
  const auto prompts = testing::random_prompts(12, kVocab, 13);
  auto outcomes = testing::run_greedy(*engine, prompts, 20);
  ASSERT_EQ(outcomes.size(), prompts.size());
  int failed = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    const Outcome& o = outcomes.at(i + 1);
    EXPECT_EQ(o.finals, 1);
    if (o.finish == FinishReason::error) {
      ++failed;
      EXPECT_EQ(o.error_code, Errc::internal);
      EXPECT_NE(o.message.find("the engine failed"), std::string::npos) << o.message;
    } else {
      EXPECT_EQ(o.tokens, testing::expected_tokens(prompts[i], kVocab, 20, std::vector<int32_t>{0}, kContext));
    }
  }
  EXPECT_GE(failed, 1);
  EXPECT_LE(failed, 4) << "only the running requests (max_num_seqs 4) may fail";
  expect_all_blocks_free(*engine);
}

// Cancellations that race a restart still end each request once.
TEST(EngineFaults, CancellingDuringRestartsEndsEachRequestOnce) {
  EngineSystemConfig cfg;
  caf::actor_system sys{cfg};
  EngineConfig config = pressured("executor=4,alloc=9,swap=3");
  config.max_fault_retries = 3;
  auto good = make_fake_engine(sys, config);
  Collector collector;
  std::vector<RequestHandle> handles;
  const auto prompts = testing::random_prompts(100, kVocab, 17);
  std::mt19937_64 rng(1);
  for (size_t i = 0; i < prompts.size(); ++i) {
    handles.push_back(good->submit(testing::greedy_spec(i + 1, prompts[i], 60, true), collector.callback_for(i + 1)));
    if (rng() % 3 == 0) handles[rng() % handles.size()].cancel();
  }
  ASSERT_TRUE(collector.wait_for(prompts.size()));
  for (const auto& [id, o] : collector.outcomes()) {
    EXPECT_EQ(o.finals, 1) << id;
    EXPECT_NE(o.finish, FinishReason::error) << o.message;
  }
  expect_all_blocks_free(*good);
}

TEST(EngineFaults, SpecsAreCheckedAndCounted) {
  for (const char* bad : {"executor", "executor=0", "executor=x", "gpu=1", "swap=2,swap=3", "alloc=-1", "alloc=1++"}) {
    auto f = FaultInjector::parse(bad);
    EXPECT_FALSE(f.has_value()) << bad;
    EngineConfig c;
    c.fault_injection = bad;
    EXPECT_FALSE(validate(c)) << bad;
  }
  auto f = FaultInjector::parse("executor=2,swap=3+");
  ASSERT_TRUE(f.has_value());
  auto& inj = **f;
  EXPECT_FALSE(inj.hit(FaultPoint::executor));
  EXPECT_TRUE(inj.hit(FaultPoint::executor));
  EXPECT_FALSE(inj.hit(FaultPoint::executor));
  EXPECT_FALSE(inj.hit(FaultPoint::swap));
  EXPECT_FALSE(inj.hit(FaultPoint::swap));
  EXPECT_TRUE(inj.hit(FaultPoint::swap));
  EXPECT_TRUE(inj.hit(FaultPoint::swap));
  EXPECT_FALSE(inj.hit(FaultPoint::alloc));
  EXPECT_EQ(inj.count(FaultPoint::swap), 4);
  EXPECT_FALSE(parse_fault_recovery("retry"));
  EXPECT_EQ(*parse_fault_recovery("fail"), FaultRecovery::fail);
}

// ---- the real model: seeded sampling resumes where it was --------------------

class StoriesFaults : public testing::StoriesTest {
 protected:
  // Seeded samples with penalties (n = 2 for every third prompt).
  static std::map<request_id, Outcome> run(const std::string& faults, uint64_t* restarts) {
    EngineSystemConfig cfg;
    caf::actor_system sys{cfg};
    EngineConfig config;
    config.threads = 1;
    config.kv_cache_tokens = 16 * 24;
    config.swap_space_tokens = 16 * 64;
    config.preemption = PreemptionMode::swap;
    config.fault_injection = faults;
    auto engine = Engine::create(sys, config, *model_);
    EXPECT_TRUE(engine.has_value());
    Collector collector;
    std::mt19937_64 rng(21);
    size_t expected = 0;
    for (request_id id = 1; id <= 12; ++id) {
      RequestSpec spec;
      spec.request.id = id * 10;
      spec.request.prompt.assign(size_t(2 + rng() % 30), 1);
      for (size_t j = 1; j < spec.request.prompt.size(); ++j) spec.request.prompt[j] = 2 + int32_t(rng() % 500);
      spec.request.n = id % 3 == 0 ? 2 : 1;
      spec.request.sampling.temperature = 0.9f;
      spec.request.sampling.top_p = 0.95f;
      spec.request.sampling.repetition_penalty = 1.2f;
      spec.request.sampling.frequency_penalty = 0.3f;
      spec.request.sampling.seed = 1000 + id;
      spec.request.sampling.has_seed = true;
      spec.request.sampling.max_tokens = 48;
      spec.request.sampling.ignore_eos = true;
      expected += size_t(spec.request.n);
      (*engine)->submit(std::move(spec), collector.callback_for(id * 10));
    }
    EXPECT_TRUE(collector.wait_for(expected));
    *restarts = (*engine)->metrics().restarts.load();
    return collector.outcomes();
  }
};

TEST_F(StoriesFaults, SeededSamplingAfterARestartEqualsAnUndisturbedRun) {
  uint64_t restarts = 0;
  const auto reference = run("", &restarts);
  EXPECT_EQ(restarts, 0u);
  for (const char* faults : {"executor=6", "executor=30,alloc=50", "swap=1"}) {
    const auto disturbed = run(faults, &restarts);
    EXPECT_GE(restarts, 1u) << faults;
    ASSERT_EQ(disturbed.size(), reference.size()) << faults;
    for (const auto& [id, o] : reference) {
      const Outcome& d = disturbed.at(id);
      EXPECT_EQ(d.finals, 1) << faults << ", " << id;
      EXPECT_EQ(d.finish, o.finish) << faults << ", " << id << ": " << d.message;
      EXPECT_EQ(d.tokens, o.tokens) << faults << ", request " << id;
    }
  }
}

}  // namespace
}  // namespace conveyor
