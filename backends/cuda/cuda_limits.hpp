// The model shapes and step sizes kernels/cuda can run. make_cuda_backend
// checks them before it uploads anything, so that a model the kernels cannot
// run is refused at start-up with the limit named, not by a launch error at
// its first step (paged_attention returns cudaErrorInvalidValue for a shape
// it has no code for; a grid dimension past 65535 fails the launch).
//
// Plain host code over ModelConfig (no CUDA), so that the check is tested
// on machines without a GPU (tests/backends/cuda_host_test.cpp).
#pragma once

#include <cstdint>
#include <string>

#include "base/status.hpp"
#include "kernels/cuda/attention_math.hpp"  // kAttentionMaxGroup, kAttentionMaxHeadDim
#include "model/config.hpp"

namespace conveyor {

// The largest grid y (and z) dimension a launch may have: the attention,
// RoPE and per-head RMSNorm grids put heads there, the row kernels
// (SwiGLU, bias, bf16 rounding) a step's tokens. (Attention's partitions,
// grid z, are at most kAttentionMaxPartitions whatever the context.)
inline constexpr int64_t kCudaMaxGridY = 65535;

// Ok when kernels/cuda can run `c` in steps of up to `max_step_tokens`
// tokens with KV blocks of `kv_block_bytes` (KvCacheShape::block_bytes());
// else an error that names the limit and the model's value.
inline Status check_cuda_kernel_limits(const ModelConfig& c, int32_t max_step_tokens, int64_t kv_block_bytes) {
  namespace k = kernels::cuda;
  const std::string shape = "the model (" + std::to_string(c.n_heads) + " query heads, " +
                            std::to_string(c.n_kv_heads) + " KV heads, head size " + std::to_string(c.head_dim()) +
                            ")";
  auto refuse = [&](const std::string& why) {
    return make_error(Errc::unsupported, "--device cuda: " + shape + ": " + why + "; use --device cpu");
  };
  if (c.n_heads < 1 || c.n_kv_heads < 1 || c.n_heads % c.n_kv_heads != 0)
    return refuse("the query heads must be a whole multiple of the KV heads");
  if (c.n_heads / c.n_kv_heads > k::kAttentionMaxGroup)
    return refuse(std::to_string(c.n_heads / c.n_kv_heads) +
                  " query heads per KV head; the CUDA attention kernel takes at most " +
                  std::to_string(k::kAttentionMaxGroup));
  if (c.head_dim() < 1 || c.head_dim() > k::kAttentionMaxHeadDim)
    return refuse("the CUDA attention kernel takes head sizes 1 to " + std::to_string(k::kAttentionMaxHeadDim));
  if (int64_t(c.n_heads) + c.n_kv_heads > kCudaMaxGridY)
    return refuse("more than " + std::to_string(kCudaMaxGridY) + " heads in all (a launch grid's limit)");
  if (max_step_tokens > kCudaMaxGridY)
    return make_error(Errc::invalid_argument, "--max-batched-tokens " + std::to_string(max_step_tokens) +
                                                  ": the CUDA kernels take at most " +
                                                  std::to_string(kCudaMaxGridY) + " tokens in a step");
  // copy_blocks (copy-on-write) moves a block in 16-byte words.
  if (kv_block_bytes % 16 != 0)
    return make_error(Errc::invalid_argument,
                      "--block-size: a KV block of " + std::to_string(kv_block_bytes) +
                          " bytes; the CUDA block copy needs a multiple of 16 (use a block size that is a multiple of 8)");
  return Status::ok();
}

}  // namespace conveyor
