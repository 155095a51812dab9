// Backends chosen by EngineConfig::device: the names that parse, the CPU
// factory's resolved capacity and dtype, and a CUDA device that this build or
// machine cannot use refused with a message before any weights are touched.
#include "backends/backend.hpp"

#include <gtest/gtest.h>

#include "backends/cuda/cuda_backend.hpp"
#include "actors/engine.hpp"
#include "tests/actors/engine_test_util.hpp"

namespace conveyor {
namespace {

TEST(ParseDevice, AcceptsCpuCudaAndAnOrdinal) {
  auto cpu = parse_device("cpu");
  ASSERT_TRUE(cpu.has_value());
  EXPECT_EQ(cpu->kind, DeviceKind::cpu);
  auto cuda = parse_device("cuda");
  ASSERT_TRUE(cuda.has_value());
  EXPECT_EQ(cuda->kind, DeviceKind::cuda);
  EXPECT_EQ(cuda->index, 0);
  auto third = parse_device("cuda:3");
  ASSERT_TRUE(third.has_value());
  EXPECT_EQ(third->index, 3);
  EXPECT_EQ(to_string(*third), "cuda:3");
  EXPECT_EQ(to_string(*cpu), "cpu");
}

TEST(ParseDevice, RefusesOtherNamesSayingWhich) {
  for (const char* text : {"", "gpu", "CUDA", "cuda:", "cuda:-1", "cuda:1x", "cuda:1024", "cpu:0", " cuda"}) {
    auto d = parse_device(text);
    ASSERT_FALSE(d.has_value()) << text;
    EXPECT_NE(d.error().message.find("must be cpu, cuda or cuda:N"), std::string::npos) << d.error().message;
  }
  EXPECT_EQ(*parse_device("cuda:1"), (DeviceSpec{DeviceKind::cuda, 1}));
  EXPECT_EQ(to_string(*parse_device("cuda")), "cuda:0");
}

TEST(CpuBackend, ResolvesCapacityAndDtype) {
  auto model = load_model("dummy:tiny");
  ASSERT_TRUE(model.has_value()) << model.error().message;
  EngineConfig c;
  c.kv_cache_tokens = 100;  // rounded down to whole blocks
  c.kv_cache_dtype = KvDtype::f16;
  c.swap_space_tokens = 64;
  c.threads = 1;
  auto b = backend_factory(DeviceSpec{})(c, std::move(model).value());
  ASSERT_TRUE(b.has_value()) << b.error().message;
  EXPECT_EQ(b->capacity.tokens, 96);
  EXPECT_EQ(b->kv_dtype, KvDtype::f16);
  EXPECT_NE(b->runner, nullptr);
  EXPECT_NE(b->swap, nullptr);
  EXPECT_FALSE(b->weights_description.empty());
}

// q8_0 keeps blocks of 32 values: a model whose heads are 8 wide is refused
// with a message that says so, before anything is allocated.
TEST(CpuBackend, RefusesQ8KvForHeadsThatAreNotWholeBlocks) {
  auto model = load_model("dummy:tiny");  // heads of 8
  ASSERT_TRUE(model.has_value()) << model.error().message;
  EngineConfig c;
  c.kv_cache_tokens = 64;
  c.kv_cache_dtype = KvDtype::q8_0;
  c.threads = 1;
  auto b = backend_factory(DeviceSpec{})(c, std::move(model).value());
  ASSERT_FALSE(b.has_value());
  EXPECT_NE(b.error().message.find("--kv-cache-dtype q8_0: stores each head in blocks of 32 values, and this "
                                   "model's heads have 8"),
            std::string::npos)
      << b.error().message;
}

// Without CUDA compiled in, or on a machine without a device (every CI
// machine), --device cuda is an error with a message, not a crash.
TEST(CudaBackend, UnusableDeviceIsAnErrorBeforeLoading) {
  const Status s = check_device(DeviceSpec{DeviceKind::cuda, 0});
  if (s.is_ok()) GTEST_SKIP() << "a CUDA device is usable here";
  const std::string& m = s.error().message;
  if (cuda_compiled_in())
    EXPECT_NE(m.find("CUDA device"), std::string::npos) << m;
  else
    EXPECT_NE(m.find("built without CUDA"), std::string::npos) << m;

  testing::EngineSystemConfig cfg;
  caf::actor_system sys{cfg};
  auto model = load_model("dummy:tiny");
  ASSERT_TRUE(model.has_value()) << model.error().message;
  EngineConfig c;
  c.device = DeviceSpec{DeviceKind::cuda, 0};
  c.kv_cache_tokens = 256;
  auto engine = Engine::create(sys, c, std::move(model).value());
  ASSERT_FALSE(engine.has_value());
  EXPECT_EQ(engine.error().message, m);
}

TEST(CudaBackend, AnOrdinalPastTheDevicesIsRefused) {
  const Status s = check_device(DeviceSpec{DeviceKind::cuda, 1023});
  ASSERT_FALSE(s.is_ok());
  EXPECT_FALSE(s.error().message.empty());
}

}  // namespace
}  // namespace conveyor
