// The softmax arithmetic of the CUDA paged attention (paged_attention.cu):
// an online softmax over one stretch of positions, and the merge of the
// partial results of several stretches. A query token's context is cut into
// partitions of kAttentionPartition positions, each computed by its own
// thread block (so one long sequence's decode spreads over the GPU), and
// within a block each warp takes every fourth position; warps, then
// partitions, are merged in index order.
//
// The CPU kernel (kernels/cpu/paged_attention.hpp) computes the same softmax
// block by block; tests/kernels/cuda compares the two.
#pragma once

#include "kernels/cuda/hd.hpp"

namespace conveyor::kernels::cuda {

inline constexpr int32_t kAttentionPartition = 256;  // positions per thread block, below the cap
inline constexpr int32_t kAttentionWarps = 4;        // warps per thread block
inline constexpr int32_t kAttentionMaxGroup = 8;     // query heads per kv head
inline constexpr int32_t kAttentionMaxHeadDim = 256;

CONVEYOR_HD float neg_inf() { return bits_float(0xff800000u); }

// At most this many partitions to a token: past kAttentionMaxPartitions
// partitions of kAttentionPartition positions, partitions grow (by whole
// multiples of kAttentionPartition) instead of multiplying, so that the
// workspace (paged_attention_workspace_bytes) has a bound that does not
// depend on the context length, and the CUDA backend reserves it before the
// KV pool takes its share of the device.
inline constexpr int32_t kAttentionMaxPartitions = 32;

// Positions per partition in a launch whose longest context is max_context.
CONVEYOR_HD int32_t attention_partition_length(int32_t max_context) {
  const int32_t base_parts = (max_context + kAttentionPartition - 1) / kAttentionPartition;
  const int32_t multiple = (base_parts + kAttentionMaxPartitions - 1) / kAttentionMaxPartitions;
  return kAttentionPartition * (multiple > 1 ? multiple : 1);
}

// Partitions of a launch whose longest context is max_context (at most kAttentionMaxPartitions).
CONVEYOR_HD int32_t attention_partitions(int32_t max_context) {
  const int32_t length = attention_partition_length(max_context);
  return (max_context + length - 1) / length;
}

// Adds one score to a running (max, sum): `rescale` multiplies what was
// accumulated so far, `weight` the new position's value.
CONVEYOR_HD void softmax_add(float score, float& max, float& sum, float& rescale, float& weight) {
  rescale = 1.0f;
  if (score > max) {
    rescale = max == neg_inf() ? 0.0f : exp_fast(max - score);
    max = score;
  }
  weight = exp_fast(score - max);
  sum = sum * rescale + weight;
}

// Merging (max_b, sum_b, acc_b) into (max_a, sum_a, acc_a): the factors for
// each side's sum and accumulator. An empty side has max -inf and factor 0.
CONVEYOR_HD void softmax_merge(float& max_a, float& sum_a, float max_b, float sum_b, float& factor_a,
                               float& factor_b) {
  const float m = max_a > max_b ? max_a : max_b;
  factor_a = max_a == neg_inf() ? 0.0f : exp_fast(max_a - m);
  factor_b = max_b == neg_inf() ? 0.0f : exp_fast(max_b - m);
  sum_a = sum_a * factor_a + sum_b * factor_b;
  max_a = m;
}

}  // namespace conveyor::kernels::cuda
