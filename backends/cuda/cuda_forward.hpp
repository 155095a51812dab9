// The model's forward pass on a CUDA device, for the runner and the embedder
// (cuda_runner.cpp, cuda_embedder.cpp). Included only where CUDA is compiled in.
//
// DeviceModel: the weights uploaded once as bf16 (norms, biases and the RoPE
// table as f32), read-only from then on and shared by every Forward.
//
// Forward: one stream's forward passes, with a cuBLAS handle on that stream
// and activation buffers of its own (grown, never shrunk; the caller makes
// sure no queued work uses them when they grow). Two Forwards of one model
// may run at once from two threads (the runner's steps and the embedder's
// batches): they share nothing but the weights.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "backends/cuda/cuda_util.hpp"
#include "model/batch.hpp"
#include "model/config.hpp"
#include "model/kv_cache.hpp"
#include "model/weights.hpp"

namespace conveyor::cuda {

struct DeviceLayer {
  DeviceBuffer attn_norm, ffn_norm;  // [dim] f32
  DeviceBuffer qkv;                  // [q_dim + 2 kv_dim, dim] bf16
  DeviceBuffer qkv_bias;             // [q_dim + 2 kv_dim] f32, when the model has one
  DeviceBuffer q_norm, k_norm;       // [head_dim] f32, when the model has them
  DeviceBuffer wo;                   // [dim, q_dim] bf16
  DeviceBuffer w13;                  // [2 hidden, dim] bf16: gate rows, then up rows
  DeviceBuffer w2;                   // [dim, hidden] bf16
  bool bias = false, qk_norm = false;
};

struct DeviceModel {
  ModelConfig c;
  std::vector<DeviceLayer> layers;
  DeviceBuffer final_norm;
  DeviceBuffer classifier;  // [vocab, dim] bf16
  DeviceBuffer embedding;   // [vocab, dim] bf16; empty when tied (the classifier is read)
  DeviceBuffer rope;        // [context_length][rotary_dim / 2][2] f32
  int64_t bytes = 0;        // uploaded

  // Uploads `w` (synchronous copies on the legacy default stream), releasing
  // the host copies as it goes.
  DeviceModel(const ModelConfig& config, ModelWeights& w);
};

// The int32s a forward pass reads, uploaded as one block in this order:
// tokens [n], token_begin [S + 1], start_pos [S], block tables [B],
// table_begin [S + 1], positions [n], logit rows [R], copy-on-write pairs
// [2P], placeholder fills [2F] (the last two the runner's).
struct StepInts {
  size_t tokens, token_begin, start_pos, tables, table_begin, positions, logit_rows, pairs, fills, total;
  StepInts(const ForwardBatch& b, int32_t rows, size_t n_pairs, size_t n_fills);
  // Writes the batch's part (tokens to logit rows: each span's last
  // want_logits positions, `rows` of them in all) at `h`, which holds `total`.
  void put(const ForwardBatch& b, int32_t* h) const;
};

class Forward {
 public:
  Forward(std::shared_ptr<const DeviceModel> model, cudaStream_t stream, cublasHandle_t blas);

  // Whether the activations hold a pass of `tokens` tokens, `rows` logits
  // rows and contexts up to `max_context`; reserve() grows them to that.
  bool fits(int32_t tokens, int32_t rows, int32_t max_context) const;
  void reserve(int32_t tokens, int32_t rows, int32_t max_context);

  // Queues the pass of `batch` (its ints at `d`, laid out as `at`) through
  // `kv`, then the final norm and the classifier over its `rows` logits
  // rows into logits() (none when 0). Every token's last layer output,
  // before the final norm, then stays in the activations (until the next run)
  // for classify() and final_norm().
  void run(const ForwardBatch& batch, const int32_t* d, const StepInts& at, int32_t max_context, int32_t rows,
           KvCache& kv);
  // Queues the final norm and the classifier over `n` rows of the last
  // run's output (their indices on the device at `d_rows`) into logits().
  void classify(const int32_t* d_rows, int32_t n);
  // Queues the final norm of the first `n` rows of the last run's output
  // into normed() (the pass's scratch, free once it has run).
  void final_norm(int32_t n);

  // y[n, out] (ldy) = x[n, in] · Wᵀ, or += with accumulate; W [out, in] and x bf16.
  void gemm(const DeviceBuffer& w, int32_t out, int32_t in, const uint16_t* xin, int32_t n, float* y, int64_t ldy,
            bool accumulate);

  float* normed() const { return xn_.get<float>(); }      // [tokens, dim]
  float* logits() const { return logits_.get<float>(); }  // [rows, vocab]
  uint16_t* xb() const { return xb_.get<uint16_t>(); }
  size_t final_x_bytes() const { return final_x_.bytes(); }
  size_t logits_bytes() const { return logits_.bytes(); }

 private:
  int32_t xb_width() const;

  std::shared_ptr<const DeviceModel> m_;
  cudaStream_t stream_;
  cublasHandle_t blas_;
  DeviceBuffer x_, xn_, xb_, qkv_, attn_, gate_up_, ffn_, final_x_, logits_, attention_ws_;
};

}  // namespace conveyor::cuda
