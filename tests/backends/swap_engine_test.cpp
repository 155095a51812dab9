// KV blocks as bytes, in each of the cache's dtypes: the layout's sizes, the
// pool's memory from its allocator, swap out and back in (CpuSwapEngine) and
// copy-on-write copies (CpuStepRunner) move whole blocks bit for bit.
#include "backends/cpu/cpu_swap_engine.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "backends/cpu/cpu_step_runner.hpp"
#include "kernels/cpu/paged_attention.hpp"
#include "model/formats/loader.hpp"

namespace conveyor {
namespace {

constexpr KvDtype kAllDtypes[] = {KvDtype::f32, KvDtype::f16, KvDtype::bf16, KvDtype::q8_0};

ModelConfig small_config() {
  ModelConfig c;
  c.dim = 128;  // head_dim 32: q8_0's block
  c.hidden_dim = 96;
  c.n_layers = 3;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.vocab_size = 50;
  c.context_length = 64;
  return c;
}

// Every block filled with different random values, written as the dtype.
void fill_random(KvCache& kv, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-3.0f, 3.0f);
  std::vector<float> values(kv.shape().block_elems());
  for (int32_t b = 0; b < kv.shape().n_blocks; ++b) {
    for (float& x : values) x = dist(rng);
    kernels::kv_store(kv.dtype(), values.data(), kv.block_data(b), int64_t(values.size()));
  }
}

std::vector<std::byte> block_bytes(const KvCache& kv, int32_t b) {
  const std::byte* p = kv.block_data(b);
  return {p, p + kv.shape().block_bytes()};
}

TEST(KvCacheLayout, SizesFollowTheDtype) {
  for (KvDtype dtype : kAllDtypes) {
    const KvCacheShape s = KvCacheShape::for_model(small_config(), 16, 5, dtype);
    const auto bytes = [&](size_t elems) { return kernels::kv_bytes(dtype, int64_t(elems)); };
    EXPECT_EQ(s.block_elems(), size_t(3 * 2 * 2 * 16 * 32));
    EXPECT_EQ(s.block_bytes(), bytes(s.block_elems()));
    EXPECT_EQ(s.block_bytes(), dtype == KvDtype::q8_0 ? s.block_elems() / 32 * 34 : s.block_elems() * (dtype == KvDtype::f32 ? 4 : 2));
    EXPECT_EQ(s.token_bytes() * 16, s.block_bytes());
    KvCache kv(s);
    EXPECT_EQ(kv.dtype(), dtype);
    // The same layout in every dtype: one layer's keys, then its values, then the next layer.
    const auto offset = [&](const void* p) { return size_t(static_cast<const std::byte*>(p) - kv.block_data(0)); };
    EXPECT_EQ(offset(kv.keys(0, 0)), 0u);
    EXPECT_EQ(offset(kv.values(0, 0)), bytes(s.n_kv_heads * s.head_elems()));
    EXPECT_EQ(offset(kv.keys(0, 2)), bytes(4 * s.n_kv_heads * s.head_elems()));
    EXPECT_EQ(offset(kv.keys(3, 1)), 3 * s.block_bytes() + bytes(2 * s.n_kv_heads * s.head_elems()));
  }
}

// Host memory that counts what it hands out, or refuses everything.
class CountingAllocator final : public KvAllocator {
 public:
  explicit CountingAllocator(bool refuse = false) : refuse_(refuse) {}
  std::byte* allocate(size_t bytes) override {
    if (refuse_) return nullptr;
    live_ += bytes;
    return static_cast<std::byte*>(::operator new[](bytes, std::align_val_t{64}));
  }
  void deallocate(std::byte* p, size_t bytes) override {
    live_ -= bytes;
    ::operator delete[](p, std::align_val_t{64});
  }
  KvMemory memory() const override { return KvMemory::pinned_host; }
  size_t live() const { return live_; }

 private:
  bool refuse_;
  size_t live_ = 0;
};

TEST(KvCacheMemory, ComesFromItsAllocatorAndGoesBack) {
  auto allocator = std::make_shared<CountingAllocator>();
  const KvCacheShape shape = KvCacheShape::for_model(small_config(), 16, 5, KvDtype::bf16);
  {
    auto kv = KvCache::create(shape, allocator);
    ASSERT_TRUE(kv.has_value()) << kv.error().message;
    EXPECT_EQ(allocator->live(), shape.block_bytes() * 5);
    EXPECT_EQ((*kv)->bytes(), shape.block_bytes() * 5);
    EXPECT_EQ((*kv)->memory(), KvMemory::pinned_host);
    EXPECT_EQ((*kv)->block_data(0), static_cast<const std::byte*>((*kv)->keys(0, 0)));
  }
  EXPECT_EQ(allocator->live(), 0u);
  KvCache host(shape);
  EXPECT_EQ(host.memory(), KvMemory::host);
}

TEST(KvCacheMemory, AnAllocatorThatRefusesIsAnError) {
  auto kv = KvCache::create(KvCacheShape::for_model(small_config(), 16, 5),
                            std::make_shared<CountingAllocator>(/*refuse=*/true));
  ASSERT_FALSE(kv.has_value());
  EXPECT_EQ(kv.error().code, Errc::resource_exhausted);
  EXPECT_NE(kv.error().message.find("KV cache"), std::string::npos) << kv.error().message;
}

TEST(CpuSwapEngine, BlocksRoundTripBitForBitInEachDtype) {
  for (KvDtype dtype : kAllDtypes) {
    SCOPED_TRACE(to_string(dtype));
    auto device = std::make_shared<KvCache>(KvCacheShape::for_model(small_config(), 16, 6, dtype));
    fill_random(*device, 5);
    std::vector<std::vector<std::byte>> before;
    for (int32_t b = 0; b < 6; ++b) before.push_back(block_bytes(*device, b));
    CpuSwapEngine swap(device, 4);
    copy_and_wait(swap, SwapOrder{1, SwapDirection::out, {{1, 0}, {4, 3}}});
    std::memset(device->block_data(1), 0, device->shape().block_bytes());
    std::memset(device->block_data(4), 0, device->shape().block_bytes());
    copy_and_wait(swap, SwapOrder{1, SwapDirection::in, {{0, 2}, {3, 5}}});
    EXPECT_EQ(block_bytes(*device, 2), before[1]);
    EXPECT_EQ(block_bytes(*device, 5), before[4]);
    EXPECT_EQ(block_bytes(*device, 0), before[0]);
    EXPECT_EQ(block_bytes(*device, 3), before[3]);
  }
}

TEST(CpuStepRunner, CopyOnWriteCopiesWholeBlocksInEachDtype) {
  auto model = load_model("dummy:tiny");
  ASSERT_TRUE(model.has_value()) << model.error().message;
  for (KvDtype dtype : kAllDtypes) {
    SCOPED_TRACE(to_string(dtype));
    auto kv = std::make_shared<KvCache>(KvCacheShape::for_model(model->config, 16, 5, dtype));
    fill_random(*kv, 9);
    const auto source = block_bytes(*kv, 1), untouched = block_bytes(*kv, 2);
    CpuStepRunner runner(std::make_unique<Transformer>(model->config, model->weights, 1), kv);
    StepPlan plan;
    plan.copies = {{1, 3}, {1, 4}};
    const StepResult result = runner.run(plan);
    EXPECT_TRUE(result.tokens.empty());
    EXPECT_EQ(block_bytes(*kv, 3), source);
    EXPECT_EQ(block_bytes(*kv, 4), source);
    EXPECT_EQ(block_bytes(*kv, 2), untouched);
  }
}

}  // namespace
}  // namespace conveyor
