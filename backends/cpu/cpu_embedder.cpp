#include "backends/cpu/cpu_embedder.hpp"

#include "kernels/cpu/omp_threads.hpp"

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
  const int32_t blocks = embedding_batch(inputs, first, last, kBlockSize, table_, batch_);
  if (!kv_ || kv_->shape().n_blocks < blocks)
    kv_ = std::make_unique<KvCache>(KvCacheShape::for_model(transformer_->config(), kBlockSize, blocks, kv_dtype_));
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
