// Penalties and sampling on the device (kernels.hpp); the arithmetic is
// sampling_math.hpp's, which says where it matches the CPU sampler. Built
// with --fmad=false so that no multiply-add is fused where the CPU's is not.
#include "kernels/cuda/kernels.hpp"
#include "kernels/cuda/sampling_math.hpp"

namespace conveyor::kernels::cuda {
namespace {

constexpr int kThreads = 256;
constexpr float kGreedyTemperature = 1e-5f;  // model/sampling/sampler.hpp

__global__ void penalties_kernel(float* logits, int32_t vocab, const float* repetition, const float* frequency,
                                 const float* presence, const int32_t* seen_begin, const int32_t* seen,
                                 const int32_t* gen_begin, const int32_t* generated, const int32_t* gen_counts) {
  const int32_t row = blockIdx.x;
  float* l = logits + int64_t(row) * vocab;
  const float rep = repetition[row];
  if (rep != 1.0f)
    for (int32_t i = seen_begin[row] + threadIdx.x; i < seen_begin[row + 1]; i += blockDim.x) {
      const int32_t token = seen[i];
      if (token >= 0 && token < vocab) l[token] = repetition_penalized(l[token], rep);
    }
  __syncthreads();
  const float f = frequency[row], p = presence[row];
  if (f != 0.0f || p != 0.0f)
    for (int32_t i = gen_begin[row] + threadIdx.x; i < gen_begin[row + 1]; i += blockDim.x) {
      const int32_t token = generated[i];
      if (token >= 0 && token < vocab) l[token] = count_penalized(l[token], gen_counts[i], f, p);
    }
}

__device__ void better_of(float& v, int32_t& i, float v2, int32_t i2) {
  if (argmax_better(v2, i2, v, i)) {
    v = v2;
    i = i2;
  }
}

__global__ void sample_kernel(const float* logits, int32_t vocab, const float* temperature, const float* min_p,
                              const double* uniforms, int32_t* tokens) {
  const int32_t row = blockIdx.x;
  const float* l = logits + int64_t(row) * vocab;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __shared__ float s_val[kThreads / 32];
  __shared__ int32_t s_idx[kThreads / 32];
  __shared__ double s_chunk[kThreads];

  // The greedy choice (also the answer when the max is not finite).
  float best = l[0], max = logit_or_neg_inf(l[0]);
  int32_t best_i = 0;
  for (int32_t i = threadIdx.x; i < vocab; i += kThreads) {
    better_of(best, best_i, l[i], i);
    max = fmaxf(max, logit_or_neg_inf(l[i]));
  }
  for (int offset = 16; offset > 0; offset /= 2) {
    better_of(best, best_i, __shfl_xor_sync(0xffffffffu, best, offset),
              __shfl_xor_sync(0xffffffffu, best_i, offset));
    max = fmaxf(max, __shfl_xor_sync(0xffffffffu, max, offset));
  }
  __shared__ float s_max[kThreads / 32];
  if (lane == 0) {
    s_val[warp] = best;
    s_idx[warp] = best_i;
    s_max[warp] = max;
  }
  __syncthreads();
  best = s_val[0];
  best_i = s_idx[0];
  max = s_max[0];
  for (int w = 1; w < kThreads / 32; ++w) {
    better_of(best, best_i, s_val[w], s_idx[w]);
    max = fmaxf(max, s_max[w]);
  }
  const float t = temperature[row];
  if (t < kGreedyTemperature || !isfinite(max)) {
    if (threadIdx.x == 0) tokens[row] = best_i;
    return;
  }

  const float inv_t = 1.0f / t, floor_p = min_p[row];
  const int32_t chunk = (vocab + kThreads - 1) / kThreads;
  double total = 0.0;
  const int32_t begin = threadIdx.x * chunk;
  for (int32_t i = begin; i < begin + chunk && i < vocab; ++i) total += draw_weight(l[i], max, inv_t, floor_p);
  s_chunk[threadIdx.x] = total;
  __syncthreads();
  if (threadIdx.x == 0)
    tokens[row] = draw_from_chunks(s_chunk, kThreads, chunk, vocab, uniforms[row],
                                   [=](int32_t i) { return draw_weight(l[i], max, inv_t, floor_p); });
}

}  // namespace

cudaError_t apply_penalties(float* logits, int32_t rows, int32_t vocab, const float* repetition,
                            const float* frequency, const float* presence, const int32_t* seen_begin,
                            const int32_t* seen, const int32_t* gen_begin, const int32_t* generated,
                            const int32_t* gen_counts, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  penalties_kernel<<<rows, kThreads, 0, stream>>>(logits, vocab, repetition, frequency, presence, seen_begin,
                                                  seen, gen_begin, generated, gen_counts);
  return cudaGetLastError();
}

cudaError_t sample_rows(const float* logits, int32_t rows, int32_t vocab, const float* temperature,
                        const float* min_p, const double* uniforms, int32_t* tokens, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  if (vocab < 1) return cudaErrorInvalidValue;
  sample_kernel<<<rows, kThreads, 0, stream>>>(logits, vocab, temperature, min_p, uniforms, tokens);
  return cudaGetLastError();
}

}  // namespace conveyor::kernels::cuda
