// The whole actor engine on a real actor system: first with the fake backend
// (exact expected tokens, cancellation, policy replacement, the queue bound),
// then with the real model ../shared/models/stories260K.bin (greedy outputs
// that must not depend on pool size, preemption mode, batching or the prefix
// cache).
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <random>
#include <thread>

#include "actors/executor_actor.hpp"
#include "tests/actors/engine_test_util.hpp"
#include "tests/actors/fake_backend.hpp"
#include "tests/actors/fake_engine.hpp"
#include "tests/actors/stories_fixture.hpp"
#include "tests/backends/cpu/paged_driver.hpp"  // argmax
#include "tests/backends/cpu/reference_model.hpp"
#include "tests/shared_models.hpp"

namespace conveyor {
namespace {

using testing::Collector;
using testing::EngineSystemConfig;
using testing::Outcome;
using testing::random_prompts;

using testing::kFakeContext;
using testing::kFakeVocab;
using testing::make_fake_engine;


void expect_fake_outputs(const std::map<request_id, Outcome>& outcomes,
                         const std::vector<std::vector<int32_t>>& prompts, int32_t max_tokens) {
  ASSERT_EQ(outcomes.size(), prompts.size());
  const std::vector<int32_t> eos = {0};
  for (size_t i = 0; i < prompts.size(); ++i) {
    const Outcome& o = outcomes.at(i + 1);
    EXPECT_EQ(o.finals, 1) << "request " << i + 1;
    EXPECT_NE(o.finish, FinishReason::error) << o.message;
    EXPECT_EQ(o.tokens, testing::expected_tokens(prompts[i], kFakeVocab, max_tokens, eos, kFakeContext))
        << "request " << i + 1;
  }
}

using testing::expect_all_blocks_free;

// Returns the fake runner's most steps launched at once.
size_t expect_tokens_under_swap_pressure(bool pipelined) {
  EngineSystemConfig cfg;
  caf::actor_system sys{cfg};
  std::shared_ptr<testing::FakeRunner> runner;
  auto engine = make_fake_engine(sys, testing::swap_pressure_config(), pipelined, &runner);
  const auto prompts = random_prompts(400, kFakeVocab, 7);
  auto outcomes = testing::run_greedy(*engine, prompts, 40);
  expect_fake_outputs(outcomes, prompts, 40);
  auto stats = engine->stats();
  EXPECT_TRUE(stats.has_value());
  if (stats) {
    EXPECT_GT(stats->preemptions_swap, 0u) << "the pool was meant to force swapping";
    // Generated tokens as usage counts them: the end-of-sequence tokens that
    // ended requests too, though no event carries them.
    uint64_t completion = 0, eos_ended = 0;
    for (const auto& [id, o] : outcomes) {
      completion += uint64_t(o.completion_tokens);
      eos_ended += o.finish == FinishReason::stop ? 1 : 0;
    }
    EXPECT_GT(eos_ended, 0u);
    EXPECT_EQ(stats->generated_tokens, completion);
  }
  expect_all_blocks_free(*engine);
  return runner->max_launched();
}

TEST(FakeEngine, ConcurrentRequestsUnderSwapPressureGetTheirTokens) {
  expect_tokens_under_swap_pressure(/*pipelined=*/false);
}

// A pipelined runner (StepRunner::launch) that runs each step only when
// its result is asked for, after the next step was launched: the outputs,
// under swapping, and the freed blocks are those of a runner that is not.
TEST(FakeEngine, PipelinedRunnerUnderSwapPressureGetsTheSameTokens) {
  EXPECT_EQ(expect_tokens_under_swap_pressure(/*pipelined=*/true), 2u)
      << "the executor never launched a step before finishing the last";
}

TEST(FakeEngine, CancelAtAnyTimeFreesEverything) {
  EngineSystemConfig cfg;
  caf::actor_system sys{cfg};
  EngineConfig config;
  config.block_size = 4;
  config.kv_cache_tokens = 4 * 32;
  config.swap_space_tokens = 4 * 32;
  config.max_num_seqs = 8;
  config.preemption = PreemptionMode::swap;
  auto engine = make_fake_engine(sys, config);
  Collector collector;
  std::vector<RequestHandle> handles;
  const auto prompts = random_prompts(200, kFakeVocab, 11);
  std::mt19937_64 rng(3);
  for (size_t i = 0; i < prompts.size(); ++i) {
    handles.push_back(engine->submit(testing::greedy_spec(i + 1, prompts[i], 200, true),
                                     collector.callback_for(i + 1)));
    if (rng() % 2) handles[rng() % handles.size()].cancel();
    if (rng() % 8 == 0) std::this_thread::sleep_for(std::chrono::microseconds(rng() % 2000));
  }
  for (auto& h : handles) h.cancel();
  ASSERT_TRUE(collector.wait_for(prompts.size()));
  for (const auto& [id, o] : collector.outcomes()) {
    EXPECT_EQ(o.finals, 1) << id;
    EXPECT_TRUE(o.finish == FinishReason::cancelled || o.finish == FinishReason::length) << id;
  }
  expect_all_blocks_free(*engine);
}

TEST(FakeEngine, ReplacingPoliciesUnderLoadLosesNothing) {
  EngineSystemConfig cfg;
  caf::actor_system sys{cfg};
  EngineConfig config;
  config.block_size = 4;
  config.kv_cache_tokens = 4 * 40;
  config.swap_space_tokens = 4 * 40;
  config.max_num_seqs = 12;
  auto engine = make_fake_engine(sys, config);
  const auto prompts = random_prompts(300, kFakeVocab, 5);
  Collector collector;
  for (size_t i = 0; i < prompts.size(); ++i) {
    engine->submit(testing::greedy_spec(i + 1, prompts[i], 30), collector.callback_for(i + 1));
    if (i % 10 == 0) {
      const char* admission[] = {"conservative", "watermark", "profiled"};
      const char* preemption[] = {"recompute", "swap", "cost"};
      ASSERT_TRUE(engine->set_admission_policy(admission[(i / 10) % 3]).is_ok());
      ASSERT_TRUE(engine->set_preemption_policy(preemption[(i / 10) % 3]).is_ok());
    }
  }
  ASSERT_TRUE(collector.wait_for(prompts.size()));
  expect_fake_outputs(collector.outcomes(), prompts, 30);
  EXPECT_FALSE(engine->set_admission_policy("fastest").is_ok());
  expect_all_blocks_free(*engine);
}

TEST(FakeEngine, FullWaitingQueueRefusesAtOnce) {
  EngineSystemConfig cfg;
  caf::actor_system sys{cfg};
  EngineConfig config;
  config.block_size = 4;
  config.kv_cache_tokens = 4 * 8;
  config.max_num_seqs = 1;
  config.max_waiting = 2;
  auto engine = make_fake_engine(sys, config);
  const auto prompts = random_prompts(50, kFakeVocab, 1);
  Collector collector;
  for (size_t i = 0; i < prompts.size(); ++i) {
    engine->submit(testing::greedy_spec(i + 1, prompts[i], 50, true), collector.callback_for(i + 1));
  }
  ASSERT_TRUE(collector.wait_for(prompts.size()));
  int refused = 0;
  for (const auto& [id, o] : collector.outcomes()) {
    if (o.finish == FinishReason::error) {
      EXPECT_EQ(o.error_code, Errc::resource_exhausted) << o.message;
      ++refused;
    }
  }
  EXPECT_GT(refused, 0);
  EXPECT_LT(refused, 50);
}

TEST(FakeEngine, InvalidRequestIsAnErrorEvent) {
  EngineSystemConfig cfg;
  caf::actor_system sys{cfg};
  auto engine = make_fake_engine(sys, EngineConfig{});
  Collector collector;
  RequestSpec spec;
  spec.request.prompt = {1, kFakeVocab + 5};
  engine->submit(std::move(spec), collector.callback_for(1));
  ASSERT_TRUE(collector.wait_for(1));
  const Outcome o = collector.outcomes().at(1);
  EXPECT_EQ(o.finish, FinishReason::error);
  EXPECT_EQ(o.error_code, Errc::invalid_argument);
  EXPECT_NE(o.message.find("outside the vocabulary"), std::string::npos) << o.message;
}

// An n out of range is refused with one error event, not one per sample
// it asked for (n = 5000 got 1,024 of them).
TEST(FakeEngine, AnNOutOfRangeIsOneErrorEvent) {
  EngineSystemConfig cfg;
  caf::actor_system sys{cfg};
  auto engine = make_fake_engine(sys, EngineConfig{});
  std::atomic<int> last_events{0};
  std::atomic<int> seen{0};
  RequestSpec spec = testing::greedy_spec(1, {1, 2, 3}, 4, true);
  spec.request.n = 5000;
  engine->submit(std::move(spec), [&](const StreamEvent& e) {
    if (e.last()) {
      EXPECT_EQ(e.finish, FinishReason::error);
      ++last_events;
    }
    ++seen;
  });
  for (int i = 0; i < 500 && last_events.load() == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  // A request on the same stream actor, submitted after: every event of the
  // refusal came before its last one.
  Collector after;
  for (size_t i = 0; i < 4; ++i)  // one per stream actor, at most four
    engine->submit(testing::greedy_spec(2 + i, {1, 2, 3}, 4, true), after.callback_for(2 + i));
  ASSERT_TRUE(after.wait_for(4));
  EXPECT_EQ(last_events.load(), 1);
  EXPECT_EQ(seen.load(), 1);
}

// Stop strings match text: without a tokenizer there is none, and the
// request is refused rather than run as if they were not there.
TEST(FakeEngine, StopStringsWithoutATokenizerAreRefused) {
  EngineSystemConfig cfg;
  caf::actor_system sys{cfg};
  auto engine = make_fake_engine(sys, EngineConfig{});
  Collector collector;
  RequestSpec spec = testing::greedy_spec(1, {1, 2, 3}, 4, true);
  spec.stop = {"x"};
  engine->submit(std::move(spec), collector.callback_for(1));
  ASSERT_TRUE(collector.wait_for(1));
  const Outcome o = collector.outcomes().at(1);
  EXPECT_EQ(o.finish, FinishReason::error);
  EXPECT_NE(o.message.find("tokenizer"), std::string::npos) << o.message;
}

// Destroying the engine ends every open request with an error event, also
// when the caller kept no RequestHandle (the stream actors, with no handle
// left, died before they heard that the scheduler had stopped).
TEST(FakeEngine, DestroyingTheEngineEndsEveryRequestWithoutHandles) {
  EngineSystemConfig cfg;
  caf::actor_system sys{cfg};
  Collector collector;
  const auto prompts = random_prompts(20, kFakeVocab, 5);
  {
    auto engine = make_fake_engine(sys, EngineConfig{});
    for (size_t i = 0; i < prompts.size(); ++i)
      engine->submit(testing::greedy_spec(i + 1, prompts[i], 10000, true), collector.callback_for(i + 1));
  }
  ASSERT_TRUE(collector.wait_for(prompts.size(), std::chrono::seconds(20)));
  for (const auto& [id, o] : collector.outcomes()) {
    EXPECT_EQ(o.finals, 1) << id;
    EXPECT_EQ(o.finish, FinishReason::error) << id;
  }
}

// The fake runner, 5 ms a step: a 256-token request takes over a second.
class SlowRunner final : public StepRunner {
 public:
  explicit SlowRunner(std::shared_ptr<testing::FakeRunner> inner) : inner_(std::move(inner)) {}
  StepResult run(StepPlan& plan) override {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    return inner_->run(plan);
  }
  void reset() override { inner_->reset(); }

 private:
  std::shared_ptr<testing::FakeRunner> inner_;
};

// An actor sink that stops cancels its request (it ran to its end and held
// its blocks); a null sink is taken as no callback.
TEST(FakeEngine, AnActorSinkThatStopsCancelsItsRequest) {
  EngineSystemConfig cfg;
  caf::actor_system sys{cfg};
  EngineConfig config;
  config.kv_cache_tokens = 4096;
  auto created = make_fake_engine(sys, config, false, nullptr,
                                  [](std::shared_ptr<testing::FakeRunner> fake) -> std::shared_ptr<StepRunner> {
                                    return std::make_shared<SlowRunner>(std::move(fake));
                                  });
  ASSERT_TRUE(created);
  Engine& engine = *created;
  std::atomic<int> events{0};
  // (The counter as an argument: CAF 0.17 spawns a function of no arguments
  // through a null tuple pointer, which UBSan reports.)
  caf::actor sink = sys.spawn(
      [](caf::event_based_actor* self, std::atomic<int>* events) -> caf::behavior {
        return {[self, events](const StreamEvent&) {
          if (++*events == 3) self->quit();
        }};
      },
      &events);
  engine.submit(testing::greedy_spec(1, {1, 2, 3}, kFakeContext, true), sink);
  sink = nullptr;
  bool idle = false;
  for (int i = 0; i < 500 && !idle; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    auto stats = engine.stats();
    idle = stats && events.load() >= 3 && stats->num_running == 0 && stats->num_waiting == 0;
  }
  ASSERT_TRUE(idle);
  auto stats = engine.stats();
  ASSERT_TRUE(stats);
  EXPECT_LT(stats->generated_tokens, 200u) << "the request ran on without its sink";
  EXPECT_EQ(events.load(), 3);
  expect_all_blocks_free(engine);
  // It ended as cancelled, in the metrics too (once the stream actor has
  // the scheduler's last event).
  for (int i = 0; i < 500 && engine.metrics().finished(FinishReason::cancelled) == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(engine.metrics().finished(FinishReason::cancelled), 1u);
  EXPECT_EQ(engine.metrics().e2e_request_latency.snapshot().count, 1u);
  engine.submit(testing::greedy_spec(2, {1, 2, 3}, 4, true), caf::actor{});  // nobody to tell
  expect_fake_outputs(testing::run_greedy(engine, {{1, 2, 3}}, 4), {{1, 2, 3}}, 4);
}

// Ids the engine chooses come from a range of their own: a caller's id 1
// beside an automatic one runs, and a caller's id in the engine's range is
// refused with a message saying why.
TEST(FakeEngine, CallerAndAutomaticIdsNeverCollide) {
  EngineSystemConfig cfg;
  caf::actor_system sys{cfg};
  auto engine = make_fake_engine(sys, EngineConfig{});
  Collector collector;
  const RequestHandle automatic = engine->submit(testing::greedy_spec(0, {1, 2, 3}, 5, true), collector.callback_for(0));
  EXPECT_GE(automatic.id(), kFirstAutomaticRequestId);
  EXPECT_LT(automatic.id(), kFirstSampleSeqId);
  engine->submit(testing::greedy_spec(1, {1, 2, 3}, 5, true), collector.callback_for(1));
  engine->submit(testing::greedy_spec(automatic.id() + 1, {1, 2, 3}, 5, true), collector.callback_for(2));
  ASSERT_TRUE(collector.wait_for(3));
  EXPECT_EQ(collector.outcomes().at(0).finish, FinishReason::length);
  EXPECT_EQ(collector.outcomes().at(1).finish, FinishReason::length);
  const Outcome refused = collector.outcomes().at(2);
  EXPECT_EQ(refused.finish, FinishReason::error);
  EXPECT_NE(refused.message.find("below 2^62"), std::string::npos) << refused.message;
}

// What a counting_sink received.
struct BatchCounts {
  std::mutex mutex;
  std::condition_variable cv;
  size_t batches = 0, largest = 0, done = 0;
  std::map<request_id, int32_t> tokens;
};

token_sink_actor::behavior_type counting_sink(token_sink_actor::pointer, std::shared_ptr<BatchCounts> counts) {
  return {[counts](TokenBatch& batch) {
    std::lock_guard lock(counts->mutex);
    ++counts->batches;
    counts->largest = std::max(counts->largest, batch.events.size());
    for (const TokenEvent& e : batch.events) {
      if (e.token >= 0) ++counts->tokens[e.id];
      if (e.request_done) ++counts->done;
    }
    counts->cv.notify_all();
  }};
}

// A sink that submits 16 requests to the scheduler itself gets their events
// in batches: about one per iteration, each carrying the events of every
// request that produced a token since the last (a step's tokens go out once
// the next step is dispatched, so a batch may hold two steps' events).
TEST(FakeEngine, ASinkGetsOneBatchPerIteration) {
  EngineSystemConfig cfg;
  caf::actor_system sys{cfg};
  auto engine = make_fake_engine(sys, EngineConfig{});
  auto counts = std::make_shared<BatchCounts>();
  // (Spawned with an argument: CAF 0.17 spawning a function of the actor
  // pointer alone dereferences a null tuple, which UBSan reports.)
  auto sink = sys.spawn(counting_sink, counts);
  constexpr int kRequests = 16, kTokens = 20;
  const auto prompts = random_prompts(kRequests, kFakeVocab, 3);
  // All in the scheduler's mailbox before its first admission answer, so
  // they start, and decode, together.
  for (int i = 0; i < kRequests; ++i) {
    GenerateRequest r = testing::greedy_spec(i + 1, prompts[size_t(i)], kTokens, /*ignore_eos=*/true).request;
    caf::anon_send(engine->scheduler(), submit_atom_v, std::move(r), sink);
  }
  {
    std::unique_lock lock(counts->mutex);
    ASSERT_TRUE(counts->cv.wait_for(lock, std::chrono::seconds(60), [&] { return counts->done == kRequests; }));
  }
  const auto stats = engine->stats();
  ASSERT_TRUE(stats.has_value());
  std::lock_guard lock(counts->mutex);
  EXPECT_EQ(counts->tokens.size(), size_t(kRequests));
  for (const auto& [id, n] : counts->tokens) EXPECT_EQ(n, kTokens) << "request " << id;
  EXPECT_GE(counts->largest, size_t(kRequests)) << "the 16 requests decode together";
  EXPECT_LE(counts->batches, 2 * stats->iterations + 2) << "one message per event would be " << kRequests * kTokens;
  caf::anon_send_exit(sink, caf::exit_reason::user_shutdown);
}

// A stream actor serves many requests: a callback that throws ends its own
// request (cancelled, its blocks freed) and no other.
TEST(FakeEngine, ACallbackThatThrowsEndsOnlyItsRequest) {
  EngineSystemConfig cfg;
  caf::actor_system sys{cfg};
  auto engine = make_fake_engine(sys, EngineConfig{});
  const auto prompts = random_prompts(5, kFakeVocab, 4);
  std::atomic<int> thrown{0};
  engine->submit(testing::greedy_spec(99, prompts[4], 200, true), [&thrown](const StreamEvent&) {
    ++thrown;
    throw std::runtime_error("a client's bug");
  });
  Collector collector;
  for (size_t i = 0; i < 4; ++i)
    engine->submit(testing::greedy_spec(i + 1, prompts[i], 30, true), collector.callback_for(i + 1));
  ASSERT_TRUE(collector.wait_for(4));
  for (const auto& [id, o] : collector.outcomes()) {
    EXPECT_EQ(o.finish, FinishReason::length) << "request " << id << ": " << o.message;
    EXPECT_EQ(o.tokens.size(), 30u) << "request " << id;
  }
  expect_all_blocks_free(*engine);
  EXPECT_EQ(thrown.load(), 1);
}

// A second request with a running request's id is refused (by its stream
// actor or by the scheduler) without touching the first, even when its
// callback throws on the refusal.
TEST(FakeEngine, ARefusedDuplicateIdLeavesTheRunningRequestAlone) {
  EngineSystemConfig cfg;
  caf::actor_system sys{cfg};
  auto engine = make_fake_engine(sys, EngineConfig{});
  const auto prompts = random_prompts(2, kFakeVocab, 5);
  Collector collector;
  engine->submit(testing::greedy_spec(7, prompts[0], 200, true), collector.callback_for(7));
  std::atomic<int> refusals{0};
  engine->submit(testing::greedy_spec(7, prompts[1], 10, true), [&refusals](const StreamEvent& e) {
    EXPECT_EQ(e.finish, FinishReason::error);
    EXPECT_TRUE(e.refused);
    EXPECT_NE(e.message.find("duplicate request id"), std::string::npos) << e.message;
    ++refusals;
    throw std::runtime_error("a client's bug");
  });
  ASSERT_TRUE(collector.wait_for(1));
  const Outcome o = collector.outcomes().at(7);
  EXPECT_EQ(o.finish, FinishReason::length) << o.message;
  EXPECT_EQ(o.tokens.size(), 200u);
  EXPECT_EQ(refusals.load(), 1);
  expect_all_blocks_free(*engine);
}

// A pipelined runner that says when steps are ready from a thread of its
// own, as CUDA's callback thread does: it calls the executor's callback
// there every 100 µs (a poll that finds the step ready, or nothing new),
// and without pause once flooding (the engine's shutdown, where the
// callback's reference to the executor may be the last). It records whether
// it was destroyed on that thread: the CUDA runner may not be (its
// destructor calls the CUDA API, and waits for its stream, which the
// callback holds).
class NotifyingRunner final : public StepRunner {
 public:
  NotifyingRunner(std::shared_ptr<testing::FakeRunner> inner, std::atomic<int>* destroyed_on_its_thread)
      : inner_(std::move(inner)), destroyed_on_its_thread_(destroyed_on_its_thread) {}
  ~NotifyingRunner() override {
    shared_->stop = true;
    if (!notifier_.joinable()) return;
    if (std::this_thread::get_id() == notifier_.get_id()) {
      ++*destroyed_on_its_thread_;
      notifier_.detach();  // its loop holds `shared_`, and ends
    } else {
      notifier_.join();
    }
  }
  bool pipelined() const override { return true; }
  bool verifies_drafts() const override { return true; }
  void flood() { shared_->flood = true; }
  void launch(StepPlan& plan) override { inner_->launch(plan); }
  bool ready() override { return inner_->ready(); }
  StepResult finish() override { return inner_->finish(); }
  StepResult run(StepPlan& plan) override { return inner_->run(plan); }
  void reset() override { inner_->reset(); }
  bool set_ready_callback(std::function<void()> callback) override {
    {
      std::lock_guard lock(shared_->mutex);
      shared_->callback = std::move(callback);
    }
    if (!notifier_.joinable()) {
      notifier_ = std::thread([shared = shared_] {
        while (!shared->stop) {
          std::function<void()> call;
          {
            std::lock_guard lock(shared->mutex);
            call = shared->callback;
          }
          if (call) call();
          if (!shared->flood) std::this_thread::sleep_for(std::chrono::microseconds(100));
        }
      });
    }
    return true;
  }

 private:
  struct Shared {
    std::mutex mutex;
    std::function<void()> callback;
    std::atomic<bool> stop{false}, flood{false};
  };
  std::shared_ptr<testing::FakeRunner> inner_;
  std::atomic<int>* destroyed_on_its_thread_;
  std::shared_ptr<Shared> shared_ = std::make_shared<Shared>();
  std::thread notifier_;
};

// The executor holds itself until it is stopped, so that it and its runner
// end on its own thread: never on the runner's callback thread, where the
// callback's reference to the executor could otherwise be the last one (a
// CUDA engine's shutdown hung so, now and then).
TEST(Executor, ANotifyingRunnersExecutorLivesUntilStoppedAndEndsOnItsOwnThread) {
  EngineSystemConfig cfg;
  caf::actor_system sys{cfg};
  std::atomic<int> destroyed_on_its_thread{0};
  auto kv = std::make_shared<testing::FakeKv>(16, 64, 0);
  auto runner = std::make_shared<NotifyingRunner>(
      std::make_shared<testing::FakeRunner>(kv, kFakeVocab, /*pipelined=*/true), &destroyed_on_its_thread);
  const std::weak_ptr<NotifyingRunner> alive = runner;
  runner->flood();
  caf::actor_addr address;
  {
    executor_actor executor = spawn_executor(sys, std::move(runner));
    address = executor.address();
  }  // its only handle dropped: the callback keeps calling
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(alive.expired()) << "the executor ended without being stopped";
  caf::anon_send_exit(address, caf::exit_reason::user_shutdown);
  for (int i = 0; i < 3000 && !alive.expired(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_TRUE(alive.expired()) << "the executor did not stop on an exit message";
  EXPECT_EQ(destroyed_on_its_thread.load(), 0);
}

// And an engine stops it (or the actor system would wait for ever), with the
// callback flooding the executor with polls while it does.
TEST(FakeEngine, ANotifyingRunnerEndsWithItsEngine) {
  std::atomic<int> destroyed_on_its_thread{0};
  const auto prompts = random_prompts(4, kFakeVocab, 11);
  for (int round = 0; round < 5; ++round) {
    EngineSystemConfig cfg;
    caf::actor_system sys{cfg};
    EngineConfig config;
    config.kv_cache_tokens = 4096;
    NotifyingRunner* notifier = nullptr;
    auto engine = make_fake_engine(sys, config, /*pipelined=*/true, nullptr,
                                   [&](std::shared_ptr<testing::FakeRunner> fake) -> std::shared_ptr<StepRunner> {
                                     auto runner = std::make_shared<NotifyingRunner>(std::move(fake),
                                                                                     &destroyed_on_its_thread);
                                     notifier = runner.get();
                                     return runner;
                                   });
    ASSERT_TRUE(engine);
    expect_fake_outputs(testing::run_greedy(*engine, prompts, 8), prompts, 8);
    notifier->flood();
    engine.reset();
  }  // then the actor system, which waits for every actor
  EXPECT_EQ(destroyed_on_its_thread.load(), 0);
}

// ---- the real model --------------------------------------------------------------

class Stories : public testing::StoriesTest {
 protected:
  // Greedy outputs of `prompts` under `config`.
  std::map<request_id, Outcome> run(EngineConfig config, const std::vector<std::vector<int32_t>>& prompts,
                                    int32_t max_tokens, EngineStats* stats_out = nullptr) {
    EngineSystemConfig cfg;
    caf::actor_system sys{cfg};
    config.threads = 1;
    auto engine = Engine::create(sys, config, *model_);
    EXPECT_TRUE(engine.has_value());
    auto out = testing::run_greedy(**engine, prompts, max_tokens);
    if (stats_out != nullptr) *stats_out = *(*engine)->stats();
    expect_all_blocks_free(**engine);
    return out;
  }

  static std::vector<std::vector<int32_t>> prompts(size_t n) {
    auto p = random_prompts(n, 512, 99, 2, 40);
    for (auto& x : p) x[0] = 1;  // BOS
    return p;
  }

  static std::vector<std::vector<int32_t>> tokens_of(const std::map<request_id, Outcome>& o) {
    std::vector<std::vector<int32_t>> out;
    for (const auto& [id, x] : o) {
      EXPECT_EQ(x.finals, 1);
      EXPECT_NE(x.finish, FinishReason::error) << x.message;
      out.push_back(x.tokens);
    }
    return out;
  }

};

// GenerateRequest::resume (a router's failover): a seeded request given its
// first k tokens continues exactly as the undisturbed run did, with the
// penalties' counts and the generator's position replayed, and the resumed
// tokens are not sent again. Bad resumes are refused.
TEST_F(Stories, ResumedRequestsContinueAsTheUndisturbedRun) {
  EngineSystemConfig cfg;
  caf::actor_system sys{cfg};
  EngineConfig config;
  config.threads = 1;
  auto engine = Engine::create(sys, config, *model_);
  ASSERT_TRUE(engine.has_value());
  auto spec_of = [](request_id id, std::vector<int32_t> resume) {
    RequestSpec spec = testing::greedy_spec(id, {1, 400, 300, 20, 7}, 60, true);
    spec.request.sampling.temperature = 0.9f;
    spec.request.sampling.top_p = 0.9f;
    spec.request.sampling.frequency_penalty = 0.5f;
    spec.request.sampling.seed = 42;
    spec.request.sampling.has_seed = true;
    spec.request.resume = std::move(resume);
    return spec;
  };
  testing::Collector whole;
  (*engine)->submit(spec_of(1, {}), whole.callback_for(1));
  ASSERT_TRUE(whole.wait_for(1));
  const std::vector<int32_t> all = whole.outcomes().at(1).tokens;
  ASSERT_EQ(all.size(), 60u);
  testing::Collector resumed;
  for (size_t k : {size_t(1), size_t(17), size_t(59)}) {
    (*engine)->submit(spec_of(10 + k, std::vector<int32_t>(all.begin(), all.begin() + long(k))),
                      resumed.callback_for(10 + k));
  }
  ASSERT_TRUE(resumed.wait_for(3));
  for (size_t k : {size_t(1), size_t(17), size_t(59)}) {
    const Outcome o = resumed.outcomes().at(10 + k);
    EXPECT_EQ(o.finish, FinishReason::length) << o.message;
    EXPECT_EQ(o.tokens, std::vector<int32_t>(all.begin() + long(k), all.end())) << "resumed after " << k;
  }
  testing::Collector refused;
  (*engine)->submit(spec_of(100, all), refused.callback_for(100));  // already at max_tokens
  RequestSpec bad = spec_of(101, {600});
  (*engine)->submit(bad, refused.callback_for(101));  // outside the vocabulary (512)
  RequestSpec two = spec_of(102, {3});
  two.request.n = 2;
  (*engine)->submit(two, refused.callback_for(102));
  ASSERT_TRUE(refused.wait_for(4));  // the n = 2 request ends both its samples
  for (request_id id : {100, 101, 102}) {
    EXPECT_EQ(refused.outcomes().at(id).finish, FinishReason::error) << id;
    EXPECT_EQ(refused.outcomes().at(id).error_code, Errc::invalid_argument) << id;
  }
  expect_all_blocks_free(**engine);
}

// In each KV dtype: blocks swapped out and back in hold the same bits.
TEST_F(Stories, GreedyOutputsDoNotDependOnPoolSizeOrPreemptionMode) {
  const auto p = prompts(32);
  for (const char* dtype : {"f32", "f16", "bf16"}) {
    EngineConfig large;
    large.kv_cache_tokens = 32 * 512;
    large.kv_cache_dtype = *parse_kv_cache_dtype(dtype);
    EngineStats stats;
    const auto reference = tokens_of(run(large, p, 64, &stats));
    EXPECT_EQ(stats.preemptions_recompute + stats.preemptions_swap, 0u);
    for (const char* mode : {"recompute", "swap", "cost"}) {
      EngineConfig small = large;
      small.kv_cache_tokens = 16 * 12;  // 12 blocks for 32 sequences of up to ~100 tokens
      small.swap_space_tokens = 16 * 64;
      small.preemption = *parse_preemption_mode(mode);
      EXPECT_EQ(tokens_of(run(small, p, 64, &stats)), reference) << mode << ", " << dtype;
      EXPECT_GT(stats.preemptions_recompute + stats.preemptions_swap, 0u) << mode << ", " << dtype;
    }
  }
}

// Greedy ids with the KV cache in f32 are the plain double-precision
// reference's; in f16 and bf16 they stay close to them. Greedy decoding
// amplifies any difference (after one changed token the rest of a sequence
// differs), so this bounds how many sequences stay identical; the logits
// themselves are compared position by position in
// tests/backends/cpu/transformer_test.cpp (Stories260KHalfPrecisionKvStaysClose).
TEST_F(Stories, KvCacheDtypes) {
  const auto p = prompts(32);
  constexpr int32_t kTokens = 64;
  std::vector<std::vector<int32_t>> expected;
  for (const auto& prompt : p) {
    testing::ReferenceModel ref(model_->config, model_->weights);
    std::vector<float> logits;
    for (int32_t t : prompt) logits = ref.step(t);
    std::vector<int32_t> out;
    while (int32_t(out.size()) < kTokens) {
      const int32_t next = testing::argmax(logits);
      if (next == model_->eos_ids.at(0)) break;
      out.push_back(next);
      if (int32_t(prompt.size() + out.size()) >= model_->config.context_length) break;
      logits = ref.step(next);
    }
    expected.push_back(std::move(out));
  }
  for (const char* dtype : {"f32", "f16", "bf16"}) {
    EngineConfig config;
    config.kv_cache_dtype = *parse_kv_cache_dtype(dtype);
    const auto got = tokens_of(run(config, p, kTokens));
    size_t same = 0, prefix = 0, total = 0;
    for (size_t i = 0; i < p.size(); ++i) {
      same += got[i] == expected[i];
      size_t k = 0;
      while (k < got[i].size() && k < expected[i].size() && got[i][k] == expected[i][k]) ++k;
      prefix += k;
      total += expected[i].size();
    }
    const std::string summary = std::string(dtype) + ": " + std::to_string(same) + " of " +
                                std::to_string(p.size()) + " sequences identical, " + std::to_string(prefix) +
                                " of " + std::to_string(total) + " tokens before the first difference";
    RecordProperty(std::string("summary_") + dtype, summary);
    // Measured: f32 32 of 32 (1844 of 1844 tokens), f16 28 (1753), bf16 12 (1179).
    if (std::string(dtype) == "f32") {
      EXPECT_EQ(got, expected) << summary;
    } else if (std::string(dtype) == "f16") {
      EXPECT_GE(same, 24u) << summary;
      EXPECT_GE(prefix, total * 85 / 100) << summary;
    } else {
      EXPECT_GE(same, 8u) << summary;
      EXPECT_GE(prefix, total / 2) << summary;
    }
  }
}

TEST_F(Stories, StaticAndContinuousBatchingAgree) {
  const auto p = prompts(24);
  EngineConfig continuous;
  continuous.max_num_seqs = 8;
  EngineConfig static_batching = continuous;
  static_batching.batching = BatchingMode::static_;
  const auto reference = tokens_of(run(continuous, p, 48));
  EXPECT_EQ(tokens_of(run(static_batching, p, 48)), reference);
  static_batching.batching = BatchingMode::static_padded;
  EXPECT_EQ(tokens_of(run(static_batching, p, 48)), reference);
}

// Many requests that arrive together with the same uncached prefix: the
// first computes it, the others wait for it and find it in the prefix cache
// (EngineConfig::prefix_wait), so the prefix is computed about once rather
// than once per request, and every output is what it would be without waiting.
TEST_F(Stories, RequestsArrivingTogetherWaitForTheSharedPrefix) {
  std::vector<int32_t> system{1};
  for (int i = 0; i < 160; ++i) system.push_back(2 + (i * 53) % 500);
  std::vector<std::vector<int32_t>> p;
  for (int i = 0; i < 12; ++i) {
    p.push_back(system);
    for (int j = 0; j <= i % 5; ++j) p.back().push_back(3 + i * 7 + j);
  }
  EngineConfig config;
  config.kv_cache_tokens = 16 * 512;
  EngineStats waiting, computing;
  const auto with_wait = tokens_of(run(config, p, 12, &waiting));
  config.prefix_wait = false;
  const auto without = tokens_of(run(config, p, 12, &computing));
  EXPECT_EQ(with_wait, without);
  EXPECT_EQ(computing.prefix_waits, 0u);
  // However submissions and iterations interleave (here they race), waiting
  // keeps the 160 shared tokens (10 full blocks) from being computed by more
  // than one request; the bound leaves room for one more.
  // tests/engine/scheduler_core_test.cpp compares the two modes deterministically.
  const uint64_t decodes = 12 * 11;
  EXPECT_LT(waiting.computed_tokens, 160 + 12 * 16 + decodes + 160) << "the prefix computed more than twice";
  EXPECT_GE(waiting.blocks.prefix_hit_tokens, 10u * 160);
}

// A session keeps its conversation's blocks between turns: the next turn
// finds them in the prefix cache even after other requests filled the pool,
// where a request without a session finds them evicted. Explicit release and
// expiry let go of them.
TEST_F(Stories, SessionsKeepTheirBlocksBetweenTurns) {
  EngineSystemConfig cfg;
  caf::actor_system sys{cfg};
  EngineConfig config;
  config.threads = 1;
  config.kv_cache_tokens = 16 * 40;
  config.session_max_share = 0.5;
  config.session_ttl_seconds = 30;
  auto engine = Engine::create(sys, config, *model_);
  ASSERT_TRUE(engine.has_value());
  auto turn = [&](std::vector<int32_t> prompt, const std::string& session) {
    Collector c;
    RequestSpec spec = testing::greedy_spec(0, std::move(prompt), 16, true);
    spec.request.session = session;
    (*engine)->submit(std::move(spec), c.callback_for(0));
    EXPECT_TRUE(c.wait_for(1));
    return c.outcomes().at(0);
  };
  auto flood = [&] {  // different prompts that need most of the pool, one after another
    for (int i = 0; i < 6; ++i) {
      std::vector<int32_t> p{1};
      for (int j = 0; j < 300; ++j) p.push_back(2 + (i * 131 + j * 17) % 500);
      turn(p, "");
    }
  };
  std::vector<int32_t> conversation{1};
  for (int i = 0; i < 200; ++i) conversation.push_back(2 + (i * 29) % 500);

  for (const std::string session : {"agent-7", ""}) {
    std::vector<int32_t> c = conversation;
    c[1] = session.empty() ? 3 : 4;  // not the other pass's blocks
    const Outcome first = turn(c, session);
    ASSERT_EQ(first.finish, FinishReason::length);
    if (!session.empty()) {
      EXPECT_EQ((*engine)->stats()->sessions_held, 1);
    }
    flood();
    c.insert(c.end(), first.tokens.begin(), first.tokens.end());
    c.push_back(5);  // the tool's answer
    const Outcome second = turn(c, session);
    if (session.empty()) {
      EXPECT_LT(second.cached_prompt_tokens, 64) << "the flood was meant to evict an unkept conversation";
    } else {
      // The 201 + 16 tokens of the first turn are 13 full blocks.
      EXPECT_GE(second.cached_prompt_tokens, 13 * 16);
    }
  }
  auto stats = (*engine)->stats();
  EXPECT_EQ(stats->sessions_held, 1) << "the second turn's blocks are kept in their turn";
  (*engine)->release_session("agent-7");
  expect_all_blocks_free(**engine);
  EXPECT_EQ((*engine)->stats()->sessions_held, 0);

  // Expiry, while the engine is idle.
  EngineConfig short_lived = config;
  short_lived.session_ttl_seconds = 0.2;
  auto engine2 = Engine::create(sys, short_lived, *model_);
  ASSERT_TRUE(engine2.has_value());
  Collector c;
  RequestSpec spec = testing::greedy_spec(0, conversation, 8, true);
  spec.request.session = "brief";
  (*engine2)->submit(std::move(spec), c.callback_for(0));
  ASSERT_TRUE(c.wait_for(1));
  expect_all_blocks_free(**engine2);  // waits up to a second
  EXPECT_EQ((*engine2)->stats()->sessions_held, 0);
}

// A request that reaches the scheduler while it builds an iteration with
// nothing to run (here: the one that lets a released session's blocks go),
// with a session's expiry wake armed, must still be planned when that build
// ends, not wait for the expiry.
TEST_F(Stories, RequestArrivingDuringAnEmptyIterationIsPlanned) {
  EngineSystemConfig cfg;
  caf::actor_system sys{cfg};
  EngineConfig config;
  config.threads = 1;
  config.kv_cache_tokens = 16 * 40;
  config.session_ttl_seconds = 600;
  auto engine = Engine::create(sys, config, *model_);
  ASSERT_TRUE(engine.has_value());
  std::vector<int32_t> prompt{1};
  for (int i = 0; i < 40; ++i) prompt.push_back(2 + (i * 29) % 500);
  auto turn = [&](const std::string& session) {
    RequestSpec spec = testing::greedy_spec(0, prompt, 4, true);
    spec.request.session = session;
    return spec;
  };
  {
    Collector first;
    (*engine)->submit(turn("turn-0"), first.callback_for(0));
    ASSERT_TRUE(first.wait_for(1));
  }
  for (int i = 1; i <= 50; ++i) {
    // Idle with a session kept: its expiry wake is armed. The release starts
    // an iteration; the request, one hop behind it, arrives while it is built.
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    Collector c;
    (*engine)->release_session("turn-" + std::to_string(i - 1));
    (*engine)->submit(turn("turn-" + std::to_string(i)), c.callback_for(0));
    ASSERT_TRUE(c.wait_for(1, std::chrono::seconds(5))) << "turn " << i << " was never planned";
    EXPECT_EQ(c.outcomes().at(0).finish, FinishReason::length);
  }
  (*engine)->release_session("turn-50");
  expect_all_blocks_free(**engine);
}

TEST_F(Stories, SharedPrefixIsComputedOnce) {
  std::vector<int32_t> prefix = prompts(1)[0];
  prefix.resize(1);
  for (int i = 0; i < 200; ++i) prefix.push_back(2 + (i * 37) % 500);
  std::vector<int32_t> second = prefix;
  second.push_back(42);

  EngineSystemConfig cfg;
  caf::actor_system sys{cfg};
  EngineConfig config;
  config.threads = 1;
  auto engine = Engine::create(sys, config, *model_);
  ASSERT_TRUE(engine.has_value());
  testing::run_greedy(**engine, {prefix}, 16);
  auto stats_before = *(*engine)->stats();
  auto warm = testing::run_greedy(**engine, {second}, 16);
  auto stats_after = *(*engine)->stats();
  // 202 tokens in 16-token blocks: the 12 full blocks inside the shared
  // 201-token prefix are reused; only the rest is computed.
  EXPECT_EQ(warm.at(1).cached_prompt_tokens, 192);
  EXPECT_EQ(stats_after.blocks.prefix_hit_tokens - stats_before.blocks.prefix_hit_tokens, 192u);
  // Computed: the 10 uncached prompt tokens, then one decode per emitted token
  // but the last when the request ended by length.
  const Outcome& w = warm.at(1);
  const uint64_t decodes = w.tokens.size() - (w.finish == FinishReason::length ? 1 : 0);
  EXPECT_EQ(stats_after.computed_tokens - stats_before.computed_tokens, second.size() - 192 + decodes);

  EngineConfig cold = config;
  cold.prefix_caching = false;
  EXPECT_EQ(tokens_of(warm), tokens_of(run(cold, {second}, 16)));
}

// n samples of one prompt: the prompt is computed once and its blocks are
// shared, and sample i produces exactly what a single request with seed + i
// produces, whether the pool is ample or so small that the samples are
// preempted (swapped, with their shared blocks) many times.
TEST_F(Stories, SamplesOfOnePromptShareItsBlocksAndMatchSingleRequests) {
  constexpr int32_t kSamples = 4, kMaxTokens = 24;
  std::vector<int32_t> prompt = prompts(1)[0];
  prompt.resize(41);  // two full 16-token blocks and a partly filled third
  for (size_t i = 1; i < prompt.size(); ++i) prompt[i] = 2 + int32_t(i * 29 % 500);
  auto sampled = [&](uint64_t seed, int32_t n) {
    RequestSpec spec = testing::greedy_spec(0, prompt, kMaxTokens, /*ignore_eos=*/true);
    spec.request.sampling.temperature = 1.0f;
    spec.request.sampling.has_seed = true;
    spec.request.sampling.seed = seed;
    spec.request.n = n;
    return spec;
  };
  auto tokens = [](Collector& c) {
    std::vector<std::vector<int32_t>> out;
    for (const auto& [index, o] : c.outcomes()) {
      EXPECT_EQ(o.finals, 1) << "sample " << index;
      out.push_back(o.tokens);
    }
    return out;
  };

  // In each KV dtype: the copy of the shared block and the swaps move its bits.
  for (const char* dtype : {"f32", "f16", "bf16"}) {
    SCOPED_TRACE(dtype);
    EngineSystemConfig cfg;
    caf::actor_system sys{cfg};
    EngineConfig config;
    config.threads = 1;
    config.prefix_caching = false;  // what is shared is shared by the fork alone
    config.kv_cache_dtype = *parse_kv_cache_dtype(dtype);
    auto engine = Engine::create(sys, config, *model_);
    ASSERT_TRUE(engine.has_value());

    Collector singles;
    for (int32_t i = 0; i < kSamples; ++i) (*engine)->submit(sampled(1234 + uint64_t(i), 1), singles.callback_for(i));
    ASSERT_TRUE(singles.wait_for(kSamples));
    const auto stats_before = *(*engine)->stats();
    Collector forked;
    (*engine)->submit(sampled(1234, kSamples), forked.callback_for(0));
    ASSERT_TRUE(forked.wait_for(kSamples));
    const auto stats_after = *(*engine)->stats();
    ASSERT_EQ(tokens(forked), tokens(singles));
    EXPECT_NE(tokens(forked)[0], tokens(forked)[1]);
    // The prompt once, then kMaxTokens - 1 decodes per sample.
    EXPECT_EQ(stats_after.computed_tokens - stats_before.computed_tokens,
              prompt.size() + uint64_t(kSamples) * (kMaxTokens - 1));
    // The shared, partly filled last prompt block was copied for all but one sample.
    EXPECT_EQ(stats_after.blocks.cow_copies - stats_before.blocks.cow_copies, uint64_t(kSamples - 1));
    expect_all_blocks_free(**engine);

    // Eight such requests in a pool of 12 blocks: the samples are swapped out
    // and back in (shared blocks and all) and still match.
    for (const char* mode : {"swap", "recompute"}) {
      EngineSystemConfig small_cfg;
      caf::actor_system small_sys{small_cfg};
      EngineConfig small = config;
      small.kv_cache_tokens = 16 * 12;
      small.swap_space_tokens = 16 * 64;
      small.preemption = *parse_preemption_mode(mode);
      auto tight = Engine::create(small_sys, small, *model_);
      ASSERT_TRUE(tight.has_value());
      Collector many;
      for (int32_t r = 0; r < 8; ++r) (*tight)->submit(sampled(1234, kSamples), many.callback_for(r * kSamples));
      ASSERT_TRUE(many.wait_for(8 * kSamples)) << mode;
      const auto all = tokens(many);
      for (int32_t r = 0; r < 8; ++r)
        for (int32_t i = 0; i < kSamples; ++i)
          EXPECT_EQ(all[size_t(r * kSamples + i)], tokens(singles)[size_t(i)]) << mode << " request " << r;
      const auto stats = *(*tight)->stats();
      EXPECT_GT(stats.preemptions_recompute + stats.preemptions_swap, 0u) << mode;
      expect_all_blocks_free(**tight);
    }
  }
}

// Stop strings end one sample, not the request: each of n samples with a stop
// string reads exactly like a single request with its seed and that stop.
// (stories260K has no vocabulary file: this uses the random GGUF model, whose
// embedded Llama 2 vocabulary gives text.)
TEST(TinyGguf, StopStringsEndOneSampleAtATime) {
  const std::string path = test::shared_model_path("tiny-random-llama-f32.gguf");
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " not found";
  auto loaded = load_model(path);
  ASSERT_TRUE(loaded.has_value()) << loaded.error().message;
  const LoadedModel& model = *loaded;
  constexpr int32_t kSamples = 3, kMaxTokens = 40;
  const std::vector<int32_t> prompt = model.tokenizer->encode("Once upon a time", /*add_bos=*/true);
  auto sampled = [&](uint64_t seed, int32_t n, std::vector<std::string> stop) {
    RequestSpec spec = testing::greedy_spec(0, prompt, kMaxTokens, /*ignore_eos=*/true);
    spec.request.sampling.temperature = 1.0f;
    spec.request.sampling.has_seed = true;
    spec.request.sampling.seed = seed;
    spec.request.n = n;
    spec.stop = std::move(stop);
    return spec;
  };
  EngineSystemConfig cfg;
  caf::actor_system sys{cfg};
  EngineConfig config;
  config.threads = 1;
  auto engine = Engine::create(sys, config, model);
  ASSERT_TRUE(engine.has_value());

  // A stop string taken from the middle of sample 1's free-running text.
  Collector free_running;
  (*engine)->submit(sampled(77, kSamples, {}), free_running.callback_for(0));
  ASSERT_TRUE(free_running.wait_for(kSamples));
  const std::string text1 = free_running.outcomes().at(1).text;
  ASSERT_GE(text1.size(), 20u) << text1;
  const std::string stop = text1.substr(text1.size() / 2, 4);

  Collector singles, forked;
  for (int32_t i = 0; i < kSamples; ++i)
    (*engine)->submit(sampled(77 + uint64_t(i), 1, {stop}), singles.callback_for(i));
  ASSERT_TRUE(singles.wait_for(kSamples));
  (*engine)->submit(sampled(77, kSamples, {stop}), forked.callback_for(0));
  ASSERT_TRUE(forked.wait_for(kSamples));
  const auto one = singles.outcomes(), many = forked.outcomes();
  for (int32_t i = 0; i < kSamples; ++i) {
    EXPECT_EQ(many.at(i).text, one.at(i).text) << "sample " << i;
    EXPECT_EQ(many.at(i).finish, one.at(i).finish) << "sample " << i;
    EXPECT_EQ(many.at(i).finals, 1) << "sample " << i;
  }
  EXPECT_EQ(many.at(1).finish, FinishReason::stop);
  EXPECT_EQ(many.at(1).text.find(stop), std::string::npos);
  expect_all_blocks_free(**engine);
}

// Decoding drops control tokens; RequestSpec::shown_tokens writes the ones it
// names into the text as their pieces (what Mistral's call parser needs).
TEST(TinyGguf, ShownControlTokensAreWrittenAsTheirPieces) {
  const std::string path = test::shared_model_path("tiny-random-llama-f32.gguf");
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " not found";
  auto loaded = load_model(path);
  ASSERT_TRUE(loaded.has_value()) << loaded.error().message;
  const int32_t bos = loaded->tokenizer->bos_id();
  ASSERT_EQ(loaded->tokenizer->token_bytes(bos), "");
  const std::vector<int32_t> prompt = loaded->tokenizer->encode("Once upon a time", /*add_bos=*/true);
  EngineSystemConfig cfg;
  caf::actor_system sys{cfg};
  EngineConfig config;
  config.threads = 1;
  auto engine = Engine::create(sys, config, *loaded);
  ASSERT_TRUE(engine.has_value());
  Collector c;
  for (int32_t shown = 0; shown < 2; ++shown) {
    RequestSpec spec = testing::greedy_spec(0, prompt, 3, /*ignore_eos=*/true);
    spec.request.sampling.logit_bias = {LogitBias{bos, 100.0f}};  // every token is <s>
    if (shown) spec.shown_tokens = {bos};
    (*engine)->submit(std::move(spec), c.callback_for(shown));
  }
  ASSERT_TRUE(c.wait_for(2));
  EXPECT_EQ(c.outcomes().at(0).text, "");
  EXPECT_EQ(c.outcomes().at(1).text, "<s><s><s>");
}

}  // namespace
}  // namespace conveyor
