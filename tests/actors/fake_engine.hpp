// A whole actor engine on the fake backend (tests/actors/fake_backend.hpp):
// vocabulary kFakeVocab, context kFakeContext, end token 0.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "actors/engine.hpp"
#include "tests/actors/fake_backend.hpp"

namespace conveyor::testing {

inline constexpr int32_t kFakeVocab = 97;
inline constexpr int32_t kFakeContext = 256;

// A runner around the fake one (slower, or with a callback of its own).
using WrapRunner = std::function<std::shared_ptr<StepRunner>(std::shared_ptr<FakeRunner>)>;

// The fake runner, its steps held until open(): requests submitted before
// that arrive together however slowly the submitting thread runs (a test
// whose point needs them together, preemption say, is not at the mercy of a
// busy machine). Held at most 30 s, so a test that fails before open() ends.
class GatedRunner final : public StepRunner {
 public:
  explicit GatedRunner(std::shared_ptr<FakeRunner> inner) : inner_(std::move(inner)) {}
  void open() {
    std::lock_guard lock(mutex_);
    open_ = true;
    opened_.notify_all();
  }
  StepResult run(StepPlan& plan) override {
    {
      std::unique_lock lock(mutex_);
      opened_.wait_for(lock, std::chrono::seconds(30), [this] { return open_; });
    }
    return inner_->run(plan);
  }
  void reset() override { inner_->reset(); }
  bool verifies_drafts() const override { return inner_->verifies_drafts(); }

 private:
  std::shared_ptr<FakeRunner> inner_;
  std::mutex mutex_;
  std::condition_variable opened_;
  bool open_ = false;
};

// make_fake_engine's `wrap` for a GatedRunner, kept in `gate`.
inline WrapRunner gated(std::shared_ptr<GatedRunner>& gate) {
  return [&gate](std::shared_ptr<FakeRunner> fake) -> std::shared_ptr<StepRunner> {
    gate = std::make_shared<GatedRunner>(std::move(fake));
    return gate;
  };
}

// `runner`, when given, receives the fake runner (pipelined: see FakeRunner);
// `wrap`, when given, makes the runner the engine runs on from it.
inline std::unique_ptr<Engine> make_fake_engine(caf::actor_system& sys, EngineConfig config,
                                                bool pipelined = false,
                                                std::shared_ptr<FakeRunner>* runner = nullptr,
                                                const WrapRunner& wrap = {}) {
  // An engine on its own runner takes its capacity in tokens.
  if (config.kv_cache_tokens == 0) config.kv_cache_tokens = 65536;
  ModelInfo info;
  info.config.vocab_size = kFakeVocab;
  info.config.context_length = kFakeContext;
  info.eos_ids = {0};
  const int32_t blocks = int32_t(config.kv_cache_tokens / config.block_size);
  const int32_t host = int32_t(config.swap_space_tokens / config.block_size);
  auto kv = std::make_shared<FakeKv>(config.block_size, blocks, host);
  auto fake = std::make_shared<FakeRunner>(kv, kFakeVocab, pipelined);
  if (runner != nullptr) *runner = fake;
  std::shared_ptr<StepRunner> used = wrap ? wrap(fake) : fake;
  auto engine = Engine::create(sys, config, info, std::move(used), std::make_shared<FakeSwapEngine>(kv));
  EXPECT_TRUE(engine.has_value()) << engine.error().message;
  return engine ? std::move(engine).value() : nullptr;
}

// A pool small enough that 16 sequences of the engine tests' prompts swap.
inline EngineConfig swap_pressure_config() {
  EngineConfig c;
  c.block_size = 4;
  c.kv_cache_tokens = 4 * 40;
  c.swap_space_tokens = 4 * 64;
  c.max_num_seqs = 16;
  c.max_batched_tokens = 64;
  c.prefill_chunk = 16;
  c.preemption = PreemptionMode::swap;
  return c;
}

// Waits up to a second for every KV block (device and host) to be free and
// nothing to run: the last releases travel with the iteration after the last token.
inline void expect_all_blocks_free(Engine& engine) {
  for (int i = 0; i < 200; ++i) {
    auto stats = engine.stats();
    ASSERT_TRUE(stats.has_value());
    if (stats->blocks.used == 0 && stats->blocks.host_used == 0 && stats->num_running == 0) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  auto stats = engine.stats();
  EXPECT_EQ(stats->blocks.used, 0);
  EXPECT_EQ(stats->blocks.host_used, 0);
}

}  // namespace conveyor::testing
