#include "backends/cpu/cpu_embedder.hpp"

#include "kernels/cpu/omp_threads.hpp"

#include <numeric>
#include <string>

namespace conveyor {

CpuEmbedder::CpuEmbedder(std::shared_ptr<const Transformer> transformer, KvDtype kv_dtype)
    : transformer_(std::move(transformer)), kv_dtype_(kv_dtype), workspace_(transformer_->make_workspace()) {}

Expected<std::vector<std::vector<float>>> CpuEmbedder::embed(const std::vector<std::vector<int32_t>>& inputs,
                                                             Pooling pooling) {
  const ModelConfig& c = transformer_->config();
  if (Status st = check_embedding_inputs(inputs, c.context_length, c.vocab_size); !st) return st.error();
  std::lock_guard lock(mutex_);
  std::vector<std::vector<float>> out(inputs.size());
  for (const auto& [first, last] : embedding_batches(inputs, kBatchTokens)) run_batch(inputs, first, last, pooling, out);
  // This thread's OpenMP team would keep the step runner's from spinning
  // between regions (kernels/cpu/omp_threads.hpp): it goes until the next call.
  kernels::release_openmp_threads();
  return out;
}

void CpuEmbedder::run_batch(const std::vector<std::vector<int32_t>>& inputs, size_t first, size_t last,
                            Pooling pooling, std::vector<std::vector<float>>& out) {
  int32_t blocks = 0;
  for (size_t i = first; i < last; ++i) blocks += (int32_t(inputs[i].size()) + kBlockSize - 1) / kBlockSize;
  if (!kv_ || kv_->shape().n_blocks < blocks)
    kv_ = std::make_unique<KvCache>(KvCacheShape::for_model(transformer_->config(), kBlockSize, blocks, kv_dtype_));
  // Each input from position 0 in blocks of its own: a batch of prompts
  // that attend only to themselves.
  table_.resize(size_t(blocks));
  std::iota(table_.begin(), table_.end(), 0);
  batch_.clear();
  int32_t next_block = 0;
  for (size_t i = first; i < last; ++i) {
    const int32_t n = int32_t(inputs[i].size()), n_blocks = (n + kBlockSize - 1) / kBlockSize;
    batch_.add_sequence(inputs[i], 0, std::span(table_).subspan(size_t(next_block), size_t(n_blocks)), false);
    next_block += n_blocks;
  }
  transformer_->hidden_states(batch_, *kv_, *workspace_, hidden_);
  const int32_t dim = transformer_->config().dim;
  for (size_t i = first; i < last; ++i) {
    const int32_t s = int32_t(i - first), begin = batch_.seq_token_begin[s];
    out[i].resize(size_t(dim));
    pool_and_normalize(hidden_.data() + int64_t(begin) * dim, int32_t(inputs[i].size()), dim, pooling,
                       out[i].data());
  }
}

}  // namespace conveyor
