// The CUDA backend's host-side rules, on any machine (no device, no CUDA
// runtime): which model shapes the kernels take (backends/cuda/cuda_limits.hpp),
// which CUDA errors lose the context for good (cuda_sticky.hpp), and that an
// engine whose runner lost its device stops with the reason after one
// restart instead of restarting for ever (actors/engine.cpp).
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "backends/cuda/cuda_limits.hpp"
#include "backends/cuda/cuda_sticky.hpp"
#include "tests/actors/engine_test_util.hpp"
#include "tests/actors/fake_engine.hpp"

namespace conveyor {
namespace {

ModelConfig shape(int32_t n_heads, int32_t n_kv_heads, int32_t head_dim) {
  ModelConfig c;
  c.n_heads = n_heads;
  c.n_kv_heads = n_kv_heads;
  c.head_size = head_dim;
  c.dim = n_heads * head_dim;
  c.context_length = 8192;
  return c;
}

// The error's message, or "" when the check passes.
std::string refusal(const ModelConfig& c, int32_t max_tokens = 2048, int64_t block_bytes = 4096) {
  const Status s = check_cuda_kernel_limits(c, max_tokens, block_bytes);
  return s ? std::string() : s.error().message;
}

TEST(CudaKernelLimits, TakesTheShapesTheKernelsHaveCodeFor) {
  for (const ModelConfig& c : {shape(32, 8, 128), shape(32, 4, 128), shape(8, 1, 64), shape(14, 2, 64),
                               shape(8, 2, 256), shape(4, 2, 48), shape(6, 6, 1)})
    EXPECT_EQ(refusal(c), "") << c.n_heads << "/" << c.n_kv_heads << " " << c.head_dim();
}

TEST(CudaKernelLimits, RefusesMoreThanEightQueryHeadsPerKvHead) {
  const std::string why = refusal(shape(32, 2, 128));
  EXPECT_NE(why.find("16 query heads per KV head"), std::string::npos) << why;
  EXPECT_NE(why.find("at most 8"), std::string::npos) << why;
  EXPECT_EQ(check_cuda_kernel_limits(shape(9, 1, 64), 2048, 4096).error().code, Errc::unsupported);
}

TEST(CudaKernelLimits, RefusesHeadSizesOver256) {
  EXPECT_EQ(refusal(shape(8, 8, 256)), "");
  const std::string why = refusal(shape(8, 8, 257));
  EXPECT_NE(why.find("head size 257"), std::string::npos) << why;
  EXPECT_NE(why.find("1 to 256"), std::string::npos) << why;
}

TEST(CudaKernelLimits, RefusesHeadsThatAreNotAWholeMultiple) {
  EXPECT_NE(refusal(shape(12, 5, 64)).find("whole multiple"), std::string::npos);
  EXPECT_NE(refusal(shape(12, 0, 64)).find("whole multiple"), std::string::npos);
}

TEST(CudaKernelLimits, RefusesStepsPastAGridDimension) {
  EXPECT_EQ(refusal(shape(32, 8, 128), 65535), "");
  EXPECT_NE(refusal(shape(32, 8, 128), 65536).find("--max-batched-tokens 65536"), std::string::npos);
  ModelConfig long_context = shape(32, 8, 128);
  long_context.context_length = 1 << 24;  // attention's partitions are capped: any context
  EXPECT_EQ(refusal(long_context), "");
}

TEST(CudaKernelLimits, RefusesKvBlocksTheBlockCopyCannotMove) {
  EXPECT_EQ(refusal(shape(32, 8, 128), 2048, 16), "");
  EXPECT_NE(refusal(shape(32, 8, 128), 2048, 24).find("multiple of 16"), std::string::npos);
}

// An illegal address or a kernel's exception loses the context (the engine
// stops); running out of memory, a bad launch configuration or a not-ready
// query do not (the engine restarts and recomputes).
TEST(CudaStickyErrors, TellALostContextFromAFailedCall) {
  for (int lost : {700, 719, 710, 716, 226, 911}) EXPECT_TRUE(sticky_cuda_error(lost)) << lost;
  // cudaSuccess, InvalidValue, MemoryAllocation, InvalidConfiguration,
  // LaunchOutOfResources, NotReady, NoDevice, Unknown.
  for (int recoverable : {0, 1, 2, 9, 701, 600, 100, 999}) EXPECT_FALSE(sticky_cuda_error(recoverable)) << recoverable;
}

// A runner whose device is lost at its `lose_at`th step, as CudaStepRunner
// is after a sticky error: that step throws the device's error; reset()
// finds the context lost, after which usable() says so and every step
// throws it. Until then, the fake model's steps.
class LosingRunner final : public StepRunner {
 public:
  LosingRunner(std::shared_ptr<testing::FakeRunner> inner, int lose_at) : inner_(std::move(inner)), lose_at_(lose_at) {}
  StepResult run(StepPlan& plan) override {
    if (lost_) throw std::runtime_error(kLost);
    if (++steps_ == lose_at_) {
      failed_ = true;
      throw std::runtime_error("step: an illegal memory access was encountered");
    }
    return inner_->run(plan);
  }
  void reset() override {
    lost_ = lost_ || failed_;
    ++resets_;
    inner_->reset();
  }
  Status usable() const override { return lost_ ? Status(make_error(Errc::internal, kLost)) : Status::ok(); }
  int resets() const { return resets_; }
  static constexpr const char* kLost = "the CUDA context is lost (test)";

 private:
  std::shared_ptr<testing::FakeRunner> inner_;
  int lose_at_, steps_ = 0, resets_ = 0;
  bool failed_ = false, lost_ = false;
};

// Every request ends with the lost context's reason, after exactly one
// restart (the one that found the context lost), and the engine stops.
TEST(LostContext, EngineStopsWithTheReasonInsteadOfRestartingForEver) {
  testing::EngineSystemConfig cfg;
  caf::actor_system sys{cfg};
  EngineConfig config;
  config.kv_cache_tokens = 4096;
  config.max_fault_retries = 100;  // not what stops it
  ModelInfo info;
  info.config.vocab_size = testing::kFakeVocab;
  info.config.context_length = testing::kFakeContext;
  info.eos_ids = {0};
  auto kv = std::make_shared<testing::FakeKv>(config.block_size, int32_t(config.kv_cache_tokens / config.block_size), 1);
  auto runner = std::make_shared<LosingRunner>(std::make_shared<testing::FakeRunner>(kv, testing::kFakeVocab), 3);
  auto engine = Engine::create(sys, config, info, runner, std::make_shared<testing::FakeSwapEngine>(kv));
  ASSERT_TRUE(engine.has_value()) << engine.error().message;
  std::vector<std::vector<int32_t>> prompts;
  for (int32_t i = 0; i < 6; ++i) prompts.push_back({1, 10 + i, 20 + i});
  const auto outcomes = testing::run_greedy(**engine, prompts, 20, /*ignore_eos=*/true);
  ASSERT_EQ(outcomes.size(), prompts.size());
  for (const auto& [id, o] : outcomes) {
    EXPECT_EQ(o.finals, 1) << id;
    EXPECT_EQ(o.finish, FinishReason::error) << id;
    EXPECT_NE(o.message.find(LosingRunner::kLost), std::string::npos) << id << ": " << o.message;
  }
  EXPECT_EQ((*engine)->metrics().restarts.load(), 1u);
  EXPECT_EQ(runner->resets(), 2);  // at start-up, and at the one restart
  EXPECT_FALSE((*engine)->stats().has_value()) << "the scheduler was meant to stop";
}

}  // namespace
}  // namespace conveyor
