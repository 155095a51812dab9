// Penalties and sampling on the device (kernels.hpp); the arithmetic is
// sampling_math.hpp's, which says where it matches the CPU sampler. Built
// with --fmad=false so that no multiply-add is fused where the CPU's is not.
#include "kernels/cuda/kernels.hpp"
#include "kernels/cuda/sampling_math.hpp"

namespace conveyor::kernels::cuda {
namespace {

constexpr int kThreads = 256;
constexpr float kGreedyTemperature = 1e-5f;  // model/sampling/sampler.hpp

__global__ void penalties_kernel(float* logits, int32_t vocab, RowPenalties p) {
  const int32_t row = blockIdx.x;
  float* l = logits + int64_t(row) * vocab;
  const PenaltyRow r = penalty_row(p, row);
  penalize_repetition(l, vocab, r, int32_t(threadIdx.x), int32_t(blockDim.x));
  __syncthreads();
  penalize_counts(l, vocab, r, int32_t(threadIdx.x), int32_t(blockDim.x));
}

__device__ void better_of(float& v, int32_t& i, float v2, int32_t i2) {
  if (argmax_better(v2, i2, v, i)) {
    v = v2;
    i = i2;
  }
}

// select_cut's collective operations (sampling_math.hpp) over one row, run
// by every thread of the block. Bins and runs live in shared memory.
struct BlockRow {
  const float* l;
  int32_t vocab;
  uint64_t* bins;  // [256]
  uint64_t* runs;  // [kThreads]: the weight of each thread's run of ids
  int32_t* found;

  template <class Weight>
  __device__ const uint64_t* histogram(uint32_t prefix, uint32_t mask, int shift, Cut within, Weight weight) {
    __syncthreads();  // every thread has read the last bins
    for (int b = threadIdx.x; b < 256; b += blockDim.x) bins[b] = 0;
    __syncthreads();
    // Most of a thread's tokens fall in the bin of its last one (in the
    // first pass nearly all share a bin or two): add runs, not tokens, so
    // that the atomics do not queue up on one address.
    uint32_t run_bin = 0;
    unsigned long long run = 0;
    for (int32_t i = threadIdx.x; i < vocab; i += blockDim.x) {
      const float x = l[i];
      if (!kept(x, i, within)) continue;
      const uint32_t key = rank_key(x);
      if ((key & mask) != prefix) continue;
      const uint32_t bin = (key >> shift) & 255u;
      if (bin != run_bin) {
        if (run != 0) atomicAdd(reinterpret_cast<unsigned long long*>(bins + run_bin), run);
        run_bin = bin;
        run = 0;
      }
      run += weight(x);
    }
    if (run != 0) atomicAdd(reinterpret_cast<unsigned long long*>(bins + run_bin), run);
    __syncthreads();
    return bins;
  }

  template <class Weight>
  __device__ int32_t tie_id(uint32_t key, Cut within, uint64_t before, uint64_t target, Weight weight) {
    const int32_t run = (vocab + int32_t(blockDim.x) - 1) / int32_t(blockDim.x);
    auto tied = [&](int32_t i) -> uint64_t {
      const float x = l[i];
      return kept(x, i, within) && rank_key(x) == key ? weight(x) : 0;
    };
    const int32_t begin = int32_t(threadIdx.x) * run, end = min(begin + run, vocab);
    uint64_t mine = 0;
    for (int32_t i = begin; i < end; ++i) mine += tied(i);
    runs[threadIdx.x] = mine;
    __syncthreads();
    if (threadIdx.x == 0) {
      uint64_t running = before;
      int32_t id = -1;
      for (int32_t t = 0; t < int32_t(blockDim.x) && id < 0; ++t) {
        if (running + runs[t] < target) {
          running += runs[t];
          continue;
        }
        id = first_reaching(t * run, min((t + 1) * run, vocab), running, target, tied);
      }
      *found = id;
    }
    __syncthreads();
    return *found;
  }
};

__global__ void sample_kernel(const float* logits, int32_t vocab, RowSampling params, int32_t* tokens) {
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
  const float t = params.temperature[row];
  if (t < kGreedyTemperature || !isfinite(max)) {
    if (threadIdx.x == 0) tokens[row] = best_i;
    return;
  }

  // top-k, then top-p within what top-k kept: one cut in the ranking.
  const float inv_t = 1.0f / t, floor_p = params.min_p[row], top_p = params.top_p[row];
  const int32_t top_k = params.top_k[row];
  __shared__ uint64_t s_bins[256], s_runs[kThreads];
  __shared__ int32_t s_found;
  BlockRow block{l, vocab, s_bins, s_runs, &s_found};
  Cut cut;
  if (top_k > 0 && top_k < vocab)
    cut = select_cut(block, cut, [](float) { return uint64_t(1); }, [=](uint64_t) { return uint64_t(top_k); });
  if (top_p < 1.0f)
    cut = select_cut(block, cut, [=](float x) { return mass_weight(x, max, inv_t); },
                     [=](uint64_t total) { return mass_target(top_p, total); });

  auto weight = [=](int32_t i) { return kept(l[i], i, cut) ? draw_weight(l[i], max, inv_t, floor_p) : 0.0f; };
  const int32_t chunk = (vocab + kThreads - 1) / kThreads;
  double total = 0.0;
  const int32_t begin = threadIdx.x * chunk;
  for (int32_t i = begin; i < begin + chunk && i < vocab; ++i) total += weight(i);
  s_chunk[threadIdx.x] = total;
  __syncthreads();
  if (threadIdx.x == 0) tokens[row] = draw_from_chunks(s_chunk, kThreads, chunk, vocab, params.uniforms[row], weight);
}

}  // namespace

cudaError_t apply_penalties(float* logits, int32_t rows, int32_t vocab, const RowPenalties& penalties,
                            cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  penalties_kernel<<<rows, kThreads, 0, stream>>>(logits, vocab, penalties);
  return cudaGetLastError();
}

cudaError_t sample_rows(const float* logits, int32_t rows, int32_t vocab, const RowSampling& params,
                        int32_t* tokens, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  if (vocab < 1) return cudaErrorInvalidValue;
  sample_kernel<<<rows, kThreads, 0, stream>>>(logits, vocab, params, tokens);
  return cudaGetLastError();
}

}  // namespace conveyor::kernels::cuda
