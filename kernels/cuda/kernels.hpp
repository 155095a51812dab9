// The CUDA kernels: host functions that launch them on a stream.
//
// Each takes the arguments of its CPU twin in kernels/cpu (raw pointers and
// sizes, the same shape comments), with every pointer in device memory, plus
// the stream; it returns the launch's error (cudaSuccess, or why the launch
// failed), never waits for the kernel, and allocates nothing: scratch comes
// from the caller (the *_workspace_bytes functions size it). The per-element
// math lives in the *_math.hpp headers beside this one, which
// tests/kernels/cuda also compiles for the host and checks against the CPU
// kernels; tests/kernels/cuda/device_test.cpp compares each kernel with its
// CPU twin on a device (and skips without one).
//
// Built for sm_80 and sm_90 by default (CMAKE_CUDA_ARCHITECTURES).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cpu/kv_dtype.hpp"
#include "kernels/cpu/paged_attention.hpp"  // PagedKvView, SpanTable
#include "kernels/cpu/rope.hpp"             // RopeStyle
#include "kernels/cuda/sampling_math.hpp"  // RowPenalties

namespace conveyor::kernels::cuda {

// ---- element-wise (kernels/cpu/rmsnorm.hpp, rope.hpp, swiglu.hpp) -----------------

cudaError_t rmsnorm(const float* x,  // [n, ldx]
                    int64_t ldx, int32_t n, int32_t dim,
                    const float* weight,  // [dim]
                    float eps,
                    float* out,  // [n, ldo]; may be x
                    int64_t ldo, cudaStream_t stream);

// The table is kernels::rope_table's, uploaded: per-pair frequencies and
// YaRN's scale as model/rope_scaling.hpp computes them.
cudaError_t rope_apply(float* x,  // [n_tokens, ldx]
                       int64_t ldx, int32_t n_tokens, int32_t n_heads, int32_t head_dim,
                       int32_t rotary_dim, RopeStyle style,
                       const int32_t* positions,  // [n_tokens]
                       const float* table,        // [n_positions][rotary_dim / 2][2]
                       cudaStream_t stream);

cudaError_t swiglu(const float* gate,  // [n, ldg]
                   const float* up,    // [n, ldg]
                   int64_t ldg, int32_t n, int32_t hidden,
                   float* out,  // [n, ldo]; may be gate
                   int64_t ldo, cudaStream_t stream);

// out[t] = table[tokens[t]] widened from bf16 (weights are uploaded as bf16).
cudaError_t embedding_gather(const uint16_t* table,  // [vocab, dim] bf16
                             int32_t dim,
                             const int32_t* tokens,  // [n]
                             int32_t n,
                             float* out,  // [n, dim]
                             cudaStream_t stream);

// RMSNorm of each head_dim slice of the first n_heads heads of each token's
// row, in place, with one weight vector for every head (Qwen3's q_norm and
// k_norm; the CPU runs kernels/cpu/rmsnorm.hpp per head).
cudaError_t head_rmsnorm(float* x,  // [n_tokens, ldx]
                         int64_t ldx, int32_t n_tokens, int32_t n_heads, int32_t head_dim,
                         const float* weight,  // [head_dim]
                         float eps, cudaStream_t stream);

// x[t][i] += bias[i] (Qwen2's q, k and v biases).
cudaError_t add_bias(float* x,  // [n, ldx]
                     int64_t ldx, int32_t n, int32_t cols, const float* bias, cudaStream_t stream);

// out[r] = x[rows[r]] (the rows that want logits).
cudaError_t gather_rows(const float* x, int64_t ldx, const int32_t* rows, int32_t n, int32_t cols,
                        float* out, int64_t ldo, cudaStream_t stream);

// tokens[pairs[2i]] = picks[pairs[2i + 1]] for i < n: a step launched
// before the previous one's samples reached the host gets them here.
cudaError_t fill_tokens(int32_t* tokens, const int32_t* pairs, int32_t n, const int32_t* picks,
                        cudaStream_t stream);

// out = x rounded to bf16 (hd.hpp's f32_to_bf16): a product's input.
cudaError_t to_bf16(const float* x, int64_t ldx, int32_t n, int32_t cols,
                    uint16_t* out,  // [n, ldo]
                    int64_t ldo, cudaStream_t stream);

// ---- the KV cache (kernels/cpu/paged_attention.hpp) ---------------------------------

// The SpanTable's arrays and the view's keys and values are device memory.
cudaError_t write_kv(const float* k,  // [n_tokens, ld]
                     const float* v,  // [n_tokens, ld]
                     int64_t ld, int32_t n_tokens, const SpanTable& spans, const PagedKvView& kv,
                     cudaStream_t stream);

// Copies whole blocks (block_bytes each, a multiple of 16) of a pool:
// pairs[2i] to pairs[2i + 1], for copy-on-write.
cudaError_t copy_blocks(void* pool, int64_t block_bytes,
                        const int32_t* pairs,  // [n_pairs][2] (source, destination)
                        int32_t n_pairs, cudaStream_t stream);

// Scratch bytes paged_attention needs for a batch of n_tokens whose longest
// context is max_context positions.
int64_t paged_attention_workspace_bytes(int32_t n_tokens, int32_t n_heads, int32_t head_dim,
                                        int32_t max_context);

// Causal grouped-query attention over the cache, as the CPU kernel computes
// it (decode tokens and prefill chunks in one flattened batch). max_context:
// the longest start_pos + span length in the batch (the host knows it from
// the plan). head_dim <= 256; n_heads / n_kv_heads <= 8.
cudaError_t paged_attention(const float* q,  // [n_tokens, ldq]
                            int64_t ldq, int32_t n_tokens, int32_t n_heads, const SpanTable& spans,
                            const PagedKvView& kv, int32_t max_context,
                            float* out,  // [n_tokens, ldo]
                            int64_t ldo, void* workspace, cudaStream_t stream);

// ---- sampling (model/sampling; sampling_math.hpp says what is mirrored) ------------


// Per row r of `logits` ([rows, vocab]): repetition penalty over the seen
// tokens, then frequency and presence over the generated ones with their
// counts, as the CPU Sampler applies them (sampling_math.hpp).
cudaError_t apply_penalties(float* logits, int32_t rows, int32_t vocab, const RowPenalties& penalties,
                            cudaStream_t stream);

// Each row's sampling parameters, [rows] each.
struct RowSampling {
  const float* temperature;  // greedy below 1e-5
  const float* min_p;        // 0: off
  const int32_t* top_k;      // 0 or >= vocab: off
  const float* top_p;        // 1: off
  const double* uniforms;    // the draw's, in [0, 1)
};

// One token per row: greedy where temperature[r] < 1e-5, else a draw with
// uniforms[r] among the tokens top-k and top-p keep (in that order) whose
// weight exp((l - max) / T) is >= min_p[r], walking them in id order.
cudaError_t sample_rows(const float* logits, int32_t rows, int32_t vocab, const RowSampling& params,
                        int32_t* tokens,  // [rows]
                        cudaStream_t stream);

}  // namespace conveyor::kernels::cuda
