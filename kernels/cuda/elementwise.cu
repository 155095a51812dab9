// RMSNorm, RoPE, SwiGLU and the embedding gather (kernels.hpp); their
// arithmetic is elementwise_math.hpp's.
#include "kernels/cuda/elementwise_math.hpp"
#include "kernels/cuda/kernels.hpp"
#include "kernels/cuda/reduce.cuh"

namespace conveyor::kernels::cuda {
namespace {

constexpr int kRowThreads = 256;

// One block per row: the sum of squares, then the scaled row.
__global__ void rmsnorm_kernel(const float* x, int64_t ldx, int32_t dim, const float* weight,
                               float eps, float* out, int64_t ldo) {
  const float* row = x + blockIdx.x * ldx;
  float sum = 0.0f;
  for (int32_t i = threadIdx.x; i < dim; i += blockDim.x) sum += row[i] * row[i];
  __shared__ float partial[kRowThreads / 32];
  sum = block_sum<kRowThreads>(sum, partial);
  const float scale = rmsnorm_scale(sum, dim, eps);
  float* o = out + blockIdx.x * ldo;
  for (int32_t i = threadIdx.x; i < dim; i += blockDim.x) o[i] = rmsnorm_apply(row[i], scale, weight[i]);
}

// One block per (token, head), one thread per rotary pair.
__global__ void rope_kernel(float* x, int64_t ldx, int32_t head_dim, int32_t half, bool adjacent,
                            const int32_t* positions, const float* table) {
  const int32_t t = blockIdx.x, h = blockIdx.y;
  float* head = x + t * ldx + int64_t(h) * head_dim;
  const float* cs = table + int64_t(positions[t]) * half * 2;
  const int32_t partner = rope_partner(half, adjacent);
  for (int32_t i = threadIdx.x; i < half; i += blockDim.x) {
    float* a = head + rope_first(i, adjacent);
    rope_rotate(a[0], a[partner], cs[2 * i], cs[2 * i + 1]);
  }
}

__global__ void swiglu_kernel(const float* gate, const float* up, int64_t ldg, int32_t hidden, float* out,
                              int64_t ldo) {
  const int32_t t = blockIdx.y;
  for (int32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < hidden; i += gridDim.x * blockDim.x)
    out[t * ldo + i] = swiglu(gate[t * ldg + i], up[t * ldg + i]);
}

__global__ void embedding_kernel(const uint16_t* table, int32_t dim, const int32_t* tokens, float* out) {
  const int32_t t = blockIdx.x;
  for (int32_t i = threadIdx.x; i < dim; i += blockDim.x)
    out[int64_t(t) * dim + i] = embedding_value(table, dim, tokens[t], i);
}

}  // namespace

cudaError_t rmsnorm(const float* x, int64_t ldx, int32_t n, int32_t dim, const float* weight, float eps,
                    float* out, int64_t ldo, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  rmsnorm_kernel<<<n, kRowThreads, 0, stream>>>(x, ldx, dim, weight, eps, out, ldo);
  return cudaGetLastError();
}

cudaError_t rope_apply(float* x, int64_t ldx, int32_t n_tokens, int32_t n_heads, int32_t head_dim,
                       int32_t rotary_dim, RopeStyle style, const int32_t* positions, const float* table,
                       cudaStream_t stream) {
  if (n_tokens == 0 || rotary_dim < 2) return cudaSuccess;
  const int32_t half = rotary_dim / 2;
  const int threads = half < 128 ? (half + 31) / 32 * 32 : 128;
  rope_kernel<<<dim3(n_tokens, n_heads), threads, 0, stream>>>(
      x, ldx, head_dim, half, style == RopeStyle::adjacent_pairs, positions, table);
  return cudaGetLastError();
}

cudaError_t swiglu(const float* gate, const float* up, int64_t ldg, int32_t n, int32_t hidden, float* out,
                   int64_t ldo, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  const int blocks_per_row = (hidden + kRowThreads - 1) / kRowThreads;
  swiglu_kernel<<<dim3(blocks_per_row, n), kRowThreads, 0, stream>>>(gate, up, ldg, hidden, out, ldo);
  return cudaGetLastError();
}

cudaError_t embedding_gather(const uint16_t* table, int32_t dim, const int32_t* tokens, int32_t n, float* out,
                             cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  embedding_kernel<<<n, kRowThreads, 0, stream>>>(table, dim, tokens, out);
  return cudaGetLastError();
}

}  // namespace conveyor::kernels::cuda
