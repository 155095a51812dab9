// The CUDA backend's host-side rules, on any machine (no device, no CUDA
// runtime): which model shapes the kernels take (backends/cuda/cuda_limits.hpp).
#include <gtest/gtest.h>

#include <string>

#include "backends/cuda/cuda_limits.hpp"

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

}  // namespace
}  // namespace conveyor
