// The forward pass of a Llama-architecture model over a paged KV cache.
//
// One call runs a flattened batch (model/batch.hpp): prefill chunks and decode
// tokens of many sequences together. Matrix products run over all the batch's
// tokens at once through the packed kernels; attention reads each sequence's blocks.
// Thread-safety: forward() runs on one thread at a time (the executor's); the
// kernels inside use all the threads they were given, as an OpenMP team of the
// calling thread (forward() sets that thread's team size). hidden_states()
// only reads the weights and brings its own Workspace, so one other thread
// may run it while forward() runs (http/embeddings: the embedding worker). Weights are repacked at
// construction into the layout of kernels/cpu/matmul.hpp, on huge pages.
// Performance notes and measurements: kernels/cpu/README.md.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "model/batch.hpp"
#include "model/config.hpp"
#include "model/kv_cache.hpp"
#include "model/weights.hpp"

namespace conveyor {

// Seconds spent in each phase of forward(), summed over calls while a
// profile is attached (Transformer::set_profile). For benchmarks.
struct ForwardProfile {
  double embed = 0;      // embedding lookup
  double norms = 0;      // RMSNorm, RoPE, KV writes: the small element-wise steps
  double matmul = 0;     // QKV, output, feed-forward products (SwiGLU fused in)
  double attention = 0;  // paged attention
  double logits = 0;     // final norm and classifier
  int64_t calls = 0;
};

class Transformer {
 public:
  // Takes the weights (they may be repacked for speed). n_threads <= 0: all cores.
  Transformer(ModelConfig config, ModelWeights weights, int n_threads = 0);
  ~Transformer();
  Transformer(const Transformer&) = delete;
  Transformer& operator=(const Transformer&) = delete;

  const ModelConfig& config() const { return config_; }
  // Bytes of the packed matrices that a decode step reads (every layer's and
  // the classifier's), in their storage encodings.
  size_t weight_bytes() const;

  // Runs `batch`, writing its keys and values into `kv`, and fills `logits`
  // with one row of vocab_size floats for each of the span rows that
  // want_logits asks for (a span's last ones), in batch order: logits is
  // resized to [num_logit_rows, vocab_size].
  // The caller guarantees that positions are < context_length and block
  // tables cover every position.
  void forward(const ForwardBatch& batch, KvCache& kv, std::vector<float>& logits);

  // After forward(), before the next: the logits of the last batch's token
  // rows `rows` (indices into its tokens, any of them), resized to
  // [rows.size(), vocab_size]. Prompt logprobs score every prompt position
  // this way; forward() itself computes only the rows that sample.
  void logits_of(std::span<const int32_t> rows, std::vector<float>& logits);

  // The scratch of one caller of hidden_states() (opaque; grown to the
  // largest batch seen, then reused).
  struct Workspace;
  struct WorkspaceDeleter {
    void operator()(Workspace* ws) const;
  };
  using WorkspacePtr = std::unique_ptr<Workspace, WorkspaceDeleter>;
  WorkspacePtr make_workspace() const;

  // Runs `batch` as forward() does (writing its keys and values into `kv`)
  // but stops before the classifier: `hidden` is resized to [n_tokens, dim],
  // the final-RMSNorm output of every token of the batch, in batch order (the
  // vectors the classifier would read). The caller guarantees what forward()
  // asks, and that `ws` and `kv` are not in use by another thread.
  void hidden_states(const ForwardBatch& batch, KvCache& kv, Workspace& ws, std::vector<float>& hidden) const;

  // Accumulates phase timings into `profile` (null: stop). Timing adds a
  // clock read per phase, nothing else.
  void set_profile(ForwardProfile* profile);

 private:
  struct Impl;
  // The transformer layers over `batch`: ws.x holds each token's residual
  // stream after the last layer. `profile` may be null.
  void run_layers(const ForwardBatch& batch, KvCache& kv, Workspace& ws, ForwardProfile* profile) const;
  ModelConfig config_;
  Impl* impl_;
};

}  // namespace conveyor
