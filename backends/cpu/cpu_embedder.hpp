// The CPU backend's Embedder (engine/embedder.hpp): the forward pass
// (backends/cpu/transformer.hpp) run to the final norm, on the same packed
// weights as the step runner, with a Workspace and a KV cache of its own.
//
// Inputs run in batches of whole inputs, up to kBatchTokens tokens per
// forward pass (an input longer than that runs alone), each input in its own
// blocks. The KV cache is allocated at the first call and grown to the
// largest batch seen: at most max(kBatchTokens, context_length) tokens plus a
// block per input, in the engine's KV element type. Its contents are thrown
// away after each batch; nothing is cached between inputs.
#pragma once

#include <memory>
#include <mutex>

#include "backends/cpu/transformer.hpp"
#include "engine/embedder.hpp"
#include "model/kv_cache.hpp"

namespace conveyor {

class CpuEmbedder final : public Embedder {
 public:
  static constexpr int32_t kBatchTokens = 2048;
  static constexpr int32_t kBlockSize = 16;

  // `kv_dtype`: the element type of its KV cache (the engine's, so that an
  // embedding sees the attention arithmetic that generation does).
  CpuEmbedder(std::shared_ptr<const Transformer> transformer, KvDtype kv_dtype);

  int32_t dim() const override { return transformer_->config().dim; }
  Expected<std::vector<std::vector<float>>> embed(const std::vector<std::vector<int32_t>>& inputs,
                                                  Pooling pooling) override;

 private:
  // Inputs [first, last) as one forward pass, their embeddings into out[first, last).
  void run_batch(const std::vector<std::vector<int32_t>>& inputs, size_t first, size_t last, Pooling pooling,
                 std::vector<std::vector<float>>& out);

  std::mutex mutex_;  // one embed() at a time: the members below are its scratch
  const std::shared_ptr<const Transformer> transformer_;
  const KvDtype kv_dtype_;
  Transformer::WorkspacePtr workspace_;
  std::unique_ptr<KvCache> kv_;
  ForwardBatch batch_;
  std::vector<int32_t> table_;
  std::vector<float> hidden_;  // [n_tokens, dim]
};

}  // namespace conveyor
