#include "backends/cpu/cpu_embedder.hpp"

#include "kernels/cpu/omp_threads.hpp"

#include <numeric>
#include <string>

namespace conveyor {

CpuEmbedder::CpuEmbedder(std::shared_ptr<const Transformer> transformer, KvDtype kv_dtype)
    : transformer_(std::move(transformer)), kv_dtype_(kv_dtype), workspace_(transformer_->make_workspace()) {}

Status CpuEmbedder::check(const std::vector<std::vector<int32_t>>& inputs) const {
  const ModelConfig& c = transformer_->config();
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::vector<int32_t>& in = inputs[i];
    const std::string which = "input " + std::to_string(i);
    if (in.empty()) return make_error(Errc::invalid_argument, which + " is empty");
    if (int64_t(in.size()) > c.context_length)
      return make_error(Errc::invalid_argument, which + " has " + std::to_string(in.size()) +
                                                    " tokens, more than the model's context of " +
                                                    std::to_string(c.context_length));
    for (int32_t id : in)
      if (id < 0 || id >= c.vocab_size)
        return make_error(Errc::invalid_argument, which + " holds token id " + std::to_string(id) +
                                                      ", outside [0, " + std::to_string(c.vocab_size) + ")");
  }
  return Status::ok();
}

Expected<std::vector<std::vector<float>>> CpuEmbedder::embed(const std::vector<std::vector<int32_t>>& inputs,
                                                             Pooling pooling) {
  if (Status st = check(inputs); !st) return st.error();
  std::lock_guard lock(mutex_);
  std::vector<std::vector<float>> out(inputs.size());
  size_t first = 0;
  while (first < inputs.size()) {
    size_t last = first + 1;
    int64_t tokens = int64_t(inputs[first].size());
    while (last < inputs.size() && tokens + int64_t(inputs[last].size()) <= kBatchTokens)
      tokens += int64_t(inputs[last++].size());
    run_batch(inputs, first, last, pooling, out);
    first = last;
  }
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
