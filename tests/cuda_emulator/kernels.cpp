// kernels/cuda's launchers, emulated for the sanitizer builds (emulator.hpp;
// the release build runs the .cu sources themselves, simt.hpp): each queues
// its CPU twin (kernels/cpu) or sampling_math.hpp's functions on the stream. They
// capture their arguments by value: the pointers' memory is read when the
// stream runs the work, as a device reads it.
#include <cstring>
#include <vector>

#include "kernels/cpu/paged_attention.hpp"
#include "kernels/cpu/rmsnorm.hpp"
#include "kernels/cpu/rope.hpp"
#include "kernels/cpu/swiglu.hpp"
#include "kernels/cuda/hd.hpp"
#include "kernels/cuda/kernels.hpp"
#include "kernels/cuda/sampling_math.hpp"
#include "tests/cuda_emulator/emulator.hpp"
#include "tests/kernels/cuda/host_sampling.hpp"

namespace conveyor::kernels::cuda {

using cuda_emulator::enqueue;

cudaError_t rmsnorm(const float* x, int64_t ldx, int32_t n, int32_t dim, const float* weight, float eps, float* out,
                    int64_t ldo, cudaStream_t stream) {
  enqueue(stream, [=] { kernels::rmsnorm(x, ldx, n, dim, weight, eps, out, ldo); });
  return cudaSuccess;
}

cudaError_t rope_apply(float* x, int64_t ldx, int32_t n_tokens, int32_t n_heads, int32_t head_dim, int32_t rotary_dim,
                       RopeStyle style, const int32_t* positions, const float* table, cudaStream_t stream) {
  enqueue(stream, [=] { kernels::rope_apply(x, ldx, n_tokens, n_heads, head_dim, rotary_dim, style, positions, table); });
  return cudaSuccess;
}

cudaError_t swiglu(const float* gate, const float* up, int64_t ldg, int32_t n, int32_t hidden, float* out,
                   int64_t ldo, cudaStream_t stream) {
  enqueue(stream, [=] { kernels::swiglu(gate, up, ldg, n, hidden, out, ldo); });
  return cudaSuccess;
}

cudaError_t embedding_gather(const uint16_t* table, int32_t dim, const int32_t* tokens, int32_t n, float* out,
                             cudaStream_t stream) {
  enqueue(stream, [=] {
    for (int32_t t = 0; t < n; ++t)
      for (int32_t i = 0; i < dim; ++i) out[int64_t(t) * dim + i] = bf16_to_f32(table[int64_t(tokens[t]) * dim + i]);
  });
  return cudaSuccess;
}

cudaError_t head_rmsnorm(float* x, int64_t ldx, int32_t n_tokens, int32_t n_heads, int32_t head_dim,
                         const float* weight, float eps, cudaStream_t stream) {
  enqueue(stream, [=] {
    for (int32_t t = 0; t < n_tokens; ++t)
      for (int32_t h = 0; h < n_heads; ++h) {
        float* head = x + t * ldx + int64_t(h) * head_dim;
        kernels::rmsnorm(head, head_dim, 1, head_dim, weight, eps, head, head_dim);
      }
  });
  return cudaSuccess;
}

cudaError_t add_bias(float* x, int64_t ldx, int32_t n, int32_t cols, const float* bias, cudaStream_t stream) {
  enqueue(stream, [=] {
    for (int32_t t = 0; t < n; ++t)
      for (int32_t i = 0; i < cols; ++i) x[t * ldx + i] += bias[i];
  });
  return cudaSuccess;
}

cudaError_t gather_rows(const float* x, int64_t ldx, const int32_t* rows, int32_t n, int32_t cols, float* out,
                        int64_t ldo, cudaStream_t stream) {
  enqueue(stream, [=] {
    for (int32_t r = 0; r < n; ++r) std::memcpy(out + r * ldo, x + rows[r] * ldx, size_t(cols) * sizeof(float));
  });
  return cudaSuccess;
}

cudaError_t fill_tokens(int32_t* tokens, const int32_t* pairs, int32_t n, const int32_t* picks, cudaStream_t stream) {
  enqueue(stream, [=] {
    for (int32_t i = 0; i < n; ++i) tokens[pairs[2 * i]] = picks[pairs[2 * i + 1]];
  });
  return cudaSuccess;
}

cudaError_t to_bf16(const float* x, int64_t ldx, int32_t n, int32_t cols, uint16_t* out, int64_t ldo,
                    cudaStream_t stream) {
  enqueue(stream, [=] {
    for (int32_t t = 0; t < n; ++t)
      for (int32_t i = 0; i < cols; ++i) out[t * ldo + i] = f32_to_bf16(x[t * ldx + i]);
  });
  return cudaSuccess;
}

cudaError_t write_kv(const float* k, const float* v, int64_t ld, int32_t, const SpanTable& spans,
                     const PagedKvView& kv, cudaStream_t stream) {
  enqueue(stream, [=] { kernels::write_kv(k, v, ld, spans, kv); });
  return cudaSuccess;
}

cudaError_t copy_blocks(void* pool, int64_t block_bytes, const int32_t* pairs, int32_t n_pairs, cudaStream_t stream) {
  enqueue(stream, [=] {
    auto* p = static_cast<std::byte*>(pool);
    for (int32_t i = 0; i < n_pairs; ++i)
      std::memcpy(p + pairs[2 * i + 1] * block_bytes, p + pairs[2 * i] * block_bytes, size_t(block_bytes));
  });
  return cudaSuccess;
}

int64_t paged_attention_workspace_bytes(int32_t, int32_t, int32_t, int32_t) { return 16; }

cudaError_t paged_attention(const float* q, int64_t ldq, int32_t, int32_t n_heads, const SpanTable& spans,
                            const PagedKvView& kv, int32_t, float* out, int64_t ldo, void*, cudaStream_t stream) {
  enqueue(stream, [=] {
    thread_local AttentionWorkspace workspace = [] {  // the stream's thread's
      AttentionWorkspace w;
      w.widen_keys = true;  // the CUDA kernel widens bf16 and q8_0 keys
      return w;
    }();
    kernels::paged_attention(q, ldq, n_heads, spans, kv, out, ldo, workspace);
  });
  return cudaSuccess;
}

cudaError_t apply_penalties(float* logits, int32_t rows, int32_t vocab, const RowPenalties& p, cudaStream_t stream) {
  enqueue(stream, [=] {
    for (int32_t r = 0; r < rows; ++r) {
      const PenaltyRow row = penalty_row(p, r);
      float* l = logits + int64_t(r) * vocab;
      penalize_repetition(l, vocab, row, 0, 1);
      penalize_counts(l, vocab, row, 0, 1);
    }
  });
  return cudaSuccess;
}

cudaError_t sample_rows(const float* logits, int32_t rows, int32_t vocab, const RowSampling& params, int32_t* tokens,
                        cudaStream_t stream) {
  if (vocab < 1) return cudaErrorInvalidValue;
  enqueue(stream, [=] {
    for (int32_t r = 0; r < rows; ++r)
      tokens[r] = host_sample_row(logits + int64_t(r) * vocab, vocab, params.temperature[r], params.min_p[r],
                                  params.top_k[r], params.top_p[r], params.uniforms[r]);
  });
  return cudaSuccess;
}

}  // namespace conveyor::kernels::cuda
