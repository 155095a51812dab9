// Paged attention (kernels.hpp): one thread block per (query token, kv head,
// partition of attention_partition_length context positions: 256, longer
// past 32 partitions, attention_math.hpp) computes an online
// softmax for the kv head's query heads over its positions, each of its
// warps taking every kAttentionWarps-th position (lanes split head_dim);
// a second kernel merges a token's partitions. A decode token of a long
// sequence so spreads over many blocks; a prefill chunk is one token per
// block row, each reading its own causal context. The softmax arithmetic is
// attention_math.hpp's.
#include <algorithm>

#include "kernels/cuda/attention_math.hpp"
#include "kernels/cuda/kernels.hpp"
#include "kernels/cuda/kv_math.hpp"
#include "kernels/cuda/reduce.cuh"

namespace conveyor::kernels::cuda {
namespace {

constexpr int kThreads = kAttentionWarps * 32;

struct Partials {
  float* max;  // [n_tokens][n_heads][n_parts]
  float* sum;  // [n_tokens][n_heads][n_parts]
  float* acc;  // [n_tokens][n_heads][n_parts][head_dim], unnormalized
};

// J: head dimensions per lane (head_dim <= 32 J).
template <int D, int J>
__global__ void __launch_bounds__(kThreads)
    partition_kernel(const float* q, int64_t ldq, int32_t n_heads, SpanTable spans, PagedKvView kv,
                     int32_t n_parts, int32_t part_length, float scale, Partials out) {
  constexpr int G = kAttentionMaxGroup;
  const int32_t t = blockIdx.x, h = blockIdx.y, part = blockIdx.z;
  const int32_t group = n_heads / kv.n_kv_heads, hd = kv.head_dim;
  const int32_t s = sequence_of_token(spans.token_begin, spans.n_seqs, t);
  const int32_t n_ctx = causal_context(spans.start_pos[s], t - spans.token_begin[s]);
  const int32_t* table = spans.block_tables + spans.table_begin[s];
  const int32_t begin = part * part_length;
  const int32_t end = min(n_ctx, begin + part_length);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;

  float qv[G][J], acc[G][J], mx[G], sm[G];
#pragma unroll
  for (int g = 0; g < G; ++g) {
    mx[g] = neg_inf();
    sm[g] = 0.0f;
#pragma unroll
    for (int j = 0; j < J; ++j) {
      const int d = lane + 32 * j;
      const bool in = g < group && d < hd;
      qv[g][j] = in ? q[t * ldq + int64_t(h * group + g) * hd + d] * scale : 0.0f;
      acc[g][j] = 0.0f;
    }
  }
  for (int32_t p = begin + warp; p < end; p += kAttentionWarps) {
    const int64_t slot = kv_slot(table, p, h, kv.block_size, hd, kv.block_stride);
    float kd[J], vd[J];
#pragma unroll
    for (int j = 0; j < J; ++j) {
      const int d = lane + 32 * j;
      kd[j] = d < hd ? kv_load<D>(kv.keys, slot + d) : 0.0f;
      vd[j] = d < hd ? kv_load<D>(kv.values, slot + d) : 0.0f;
    }
#pragma unroll
    for (int g = 0; g < G; ++g) {
      if (g >= group) break;
      float dot = 0.0f;
#pragma unroll
      for (int j = 0; j < J; ++j) dot += qv[g][j] * kd[j];
      dot = warp_sum(dot);
      float rescale, weight;
      softmax_add(dot, mx[g], sm[g], rescale, weight);
#pragma unroll
      for (int j = 0; j < J; ++j) acc[g][j] = acc[g][j] * rescale + weight * vd[j];
    }
  }

  // The warps' states, merged in warp order.
  __shared__ float s_max[kAttentionWarps][G], s_sum[kAttentionWarps][G];
  __shared__ float s_acc[kAttentionWarps][G][32 * J];
#pragma unroll
  for (int g = 0; g < G; ++g) {
    if (g >= group) break;
    if (lane == 0) {
      s_max[warp][g] = mx[g];
      s_sum[warp][g] = sm[g];
    }
#pragma unroll
    for (int j = 0; j < J; ++j) s_acc[warp][g][lane + 32 * j] = acc[g][j];
  }
  __syncthreads();
  for (int g = 0; g < group; ++g) {
    const int64_t at = (int64_t(t) * n_heads + h * group + g) * n_parts + part;
    for (int d = threadIdx.x; d < hd; d += kThreads) {
      float m = s_max[0][g], total = s_sum[0][g], a = s_acc[0][g][d];
      for (int w = 1; w < kAttentionWarps; ++w) {
        float fa, fb;
        softmax_merge(m, total, s_max[w][g], s_sum[w][g], fa, fb);
        a = a * fa + s_acc[w][g][d] * fb;
      }
      out.acc[at * hd + d] = a;
      if (d == 0) {
        out.max[at] = m;
        out.sum[at] = total;
      }
    }
  }
}

// One block per (token, query head): its partitions merged in order.
__global__ void merge_kernel(Partials parts, int32_t n_parts, int32_t n_heads, int32_t hd, float* out,
                             int64_t ldo) {
  const int32_t t = blockIdx.x, qh = blockIdx.y;
  const int64_t base = (int64_t(t) * n_heads + qh) * n_parts;
  for (int d = threadIdx.x; d < hd; d += blockDim.x) {
    float m = parts.max[base], total = parts.sum[base], a = parts.acc[base * hd + d];
    for (int32_t z = 1; z < n_parts; ++z) {
      float fa, fb;
      softmax_merge(m, total, parts.max[base + z], parts.sum[base + z], fa, fb);
      a = a * fa + parts.acc[(base + z) * hd + d] * fb;
    }
    out[t * ldo + int64_t(qh) * hd + d] = a * (1.0f / total);
  }
}

template <int D, int J>
void launch_partitions(dim3 grid, const float* q, int64_t ldq, int32_t n_heads, const SpanTable& spans,
                       const PagedKvView& kv, int32_t n_parts, int32_t part_length, float scale, Partials parts,
                       cudaStream_t stream) {
  partition_kernel<D, J><<<grid, kThreads, 0, stream>>>(q, ldq, n_heads, spans, kv, n_parts, part_length, scale,
                                                        parts);
}

template <int D>
bool launch_for_head_dim(dim3 grid, const float* q, int64_t ldq, int32_t n_heads, const SpanTable& spans,
                         const PagedKvView& kv, int32_t n_parts, int32_t part_length, float scale,
                         Partials parts, cudaStream_t stream) {
  const int32_t hd = kv.head_dim;
  if (hd <= 32) launch_partitions<D, 1>(grid, q, ldq, n_heads, spans, kv, n_parts, part_length, scale, parts, stream);
  else if (hd <= 64) launch_partitions<D, 2>(grid, q, ldq, n_heads, spans, kv, n_parts, part_length, scale, parts, stream);
  else if (hd <= 96) launch_partitions<D, 3>(grid, q, ldq, n_heads, spans, kv, n_parts, part_length, scale, parts, stream);
  else if (hd <= 128) launch_partitions<D, 4>(grid, q, ldq, n_heads, spans, kv, n_parts, part_length, scale, parts, stream);
  else if (hd <= 256) launch_partitions<D, 8>(grid, q, ldq, n_heads, spans, kv, n_parts, part_length, scale, parts, stream);
  else return false;
  return true;
}

}  // namespace

int64_t paged_attention_workspace_bytes(int32_t n_tokens, int32_t n_heads, int32_t head_dim,
                                        int32_t max_context) {
  const int64_t rows = int64_t(n_tokens) * n_heads * attention_partitions(std::max(max_context, 1));
  return rows * (2 + head_dim) * int64_t(sizeof(float));
}

cudaError_t paged_attention(const float* q, int64_t ldq, int32_t n_tokens, int32_t n_heads,
                            const SpanTable& spans, const PagedKvView& kv, int32_t max_context, float* out,
                            int64_t ldo, void* workspace, cudaStream_t stream) {
  if (n_tokens == 0) return cudaSuccess;
  if (kv.n_kv_heads < 1 || n_heads % kv.n_kv_heads != 0 || n_heads / kv.n_kv_heads > kAttentionMaxGroup ||
      kv.head_dim < 1 || kv.head_dim > kAttentionMaxHeadDim || max_context < 1)
    return cudaErrorInvalidValue;
  const int32_t n_parts = attention_partitions(max_context), part_length = attention_partition_length(max_context);
  if (kv.n_kv_heads > 65535) return cudaErrorInvalidValue;
  const int64_t rows = int64_t(n_tokens) * n_heads * n_parts;
  float* w = static_cast<float*>(workspace);
  const Partials parts{w, w + rows, w + 2 * rows};
  const float scale = 1.0f / sqrtf(float(kv.head_dim));
  const dim3 grid(n_tokens, kv.n_kv_heads, n_parts);
  bool launched = false;
  switch (kv.dtype) {
    case KvDtype::f16: launched = launch_for_head_dim<1>(grid, q, ldq, n_heads, spans, kv, n_parts, part_length, scale, parts, stream); break;
    case KvDtype::bf16: launched = launch_for_head_dim<2>(grid, q, ldq, n_heads, spans, kv, n_parts, part_length, scale, parts, stream); break;
    case KvDtype::q8_0:
      launched = kv.head_dim % kQ8Block == 0 &&
                 launch_for_head_dim<3>(grid, q, ldq, n_heads, spans, kv, n_parts, part_length, scale, parts, stream);
      break;
    default: launched = launch_for_head_dim<0>(grid, q, ldq, n_heads, spans, kv, n_parts, part_length, scale, parts, stream); break;
  }
  if (!launched) return cudaErrorInvalidValue;
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  merge_kernel<<<dim3(n_tokens, n_heads), 128, 0, stream>>>(parts, n_parts, n_heads, kv.head_dim, out, ldo);
  return cudaGetLastError();
}

}  // namespace conveyor::kernels::cuda
