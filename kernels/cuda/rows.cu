// The forward pass's glue between products (kernels.hpp): per-head RMSNorm,
// bias adds, row gathers, the float32-to-bf16 conversion of a product's
// input, and the previous step's samples into a step's placeholders. Their
// arithmetic is elementwise_math.hpp's and hd.hpp's.
#include "kernels/cuda/elementwise_math.hpp"
#include "kernels/cuda/kernels.hpp"
#include "kernels/cuda/reduce.cuh"

namespace conveyor::kernels::cuda {
namespace {

constexpr int kHeadThreads = 128;
constexpr int kRowThreads = 256;

// One block per (token, head).
__global__ void head_rmsnorm_kernel(float* x, int64_t ldx, int32_t head_dim, const float* weight, float eps) {
  float* head = x + blockIdx.x * ldx + int64_t(blockIdx.y) * head_dim;
  float sum = 0.0f;
  for (int32_t i = threadIdx.x; i < head_dim; i += blockDim.x) sum += head[i] * head[i];
  __shared__ float partial[kHeadThreads / 32];
  sum = block_sum<kHeadThreads>(sum, partial);
  const float scale = rmsnorm_scale(sum, head_dim, eps);
  for (int32_t i = threadIdx.x; i < head_dim; i += blockDim.x) head[i] = rmsnorm_apply(head[i], scale, weight[i]);
}

__global__ void add_bias_kernel(float* x, int64_t ldx, int32_t cols, const float* bias) {
  float* row = x + blockIdx.y * ldx;
  for (int32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < cols; i += gridDim.x * blockDim.x) row[i] += bias[i];
}

__global__ void gather_rows_kernel(const float* x, int64_t ldx, const int32_t* rows, int32_t cols, float* out,
                                   int64_t ldo) {
  const float* src = x + int64_t(rows[blockIdx.x]) * ldx;
  float* dst = out + blockIdx.x * ldo;
  for (int32_t i = threadIdx.x; i < cols; i += blockDim.x) dst[i] = src[i];
}

__global__ void to_bf16_kernel(const float* x, int64_t ldx, int32_t cols, uint16_t* out, int64_t ldo) {
  const float* src = x + blockIdx.y * ldx;
  uint16_t* dst = out + blockIdx.y * ldo;
  for (int32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < cols; i += gridDim.x * blockDim.x)
    dst[i] = f32_to_bf16(src[i]);
}

__global__ void fill_tokens_kernel(int32_t* tokens, const int32_t* pairs, int32_t n, const int32_t* picks) {
  const int32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) tokens[pairs[2 * i]] = picks[pairs[2 * i + 1]];
}

dim3 row_grid(int32_t cols, int32_t n) { return dim3((cols + kRowThreads - 1) / kRowThreads, n); }

}  // namespace

cudaError_t head_rmsnorm(float* x, int64_t ldx, int32_t n_tokens, int32_t n_heads, int32_t head_dim,
                         const float* weight, float eps, cudaStream_t stream) {
  if (n_tokens == 0 || n_heads == 0) return cudaSuccess;
  head_rmsnorm_kernel<<<dim3(n_tokens, n_heads), kHeadThreads, 0, stream>>>(x, ldx, head_dim, weight, eps);
  return cudaGetLastError();
}

cudaError_t add_bias(float* x, int64_t ldx, int32_t n, int32_t cols, const float* bias, cudaStream_t stream) {
  if (n == 0 || cols == 0) return cudaSuccess;
  add_bias_kernel<<<row_grid(cols, n), kRowThreads, 0, stream>>>(x, ldx, cols, bias);
  return cudaGetLastError();
}

cudaError_t gather_rows(const float* x, int64_t ldx, const int32_t* rows, int32_t n, int32_t cols, float* out,
                        int64_t ldo, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  gather_rows_kernel<<<n, kRowThreads, 0, stream>>>(x, ldx, rows, cols, out, ldo);
  return cudaGetLastError();
}

cudaError_t fill_tokens(int32_t* tokens, const int32_t* pairs, int32_t n, const int32_t* picks,
                        cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  fill_tokens_kernel<<<(n + kRowThreads - 1) / kRowThreads, kRowThreads, 0, stream>>>(tokens, pairs, n, picks);
  return cudaGetLastError();
}

cudaError_t to_bf16(const float* x, int64_t ldx, int32_t n, int32_t cols, uint16_t* out, int64_t ldo,
                    cudaStream_t stream) {
  if (n == 0 || cols == 0) return cudaSuccess;
  to_bf16_kernel<<<row_grid(cols, n), kRowThreads, 0, stream>>>(x, ldx, cols, out, ldo);
  return cudaGetLastError();
}

}  // namespace conveyor::kernels::cuda
