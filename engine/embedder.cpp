#include "engine/embedder.hpp"

#include <cmath>
#include <numeric>
#include <span>
#include <string>

namespace conveyor {

const char* to_string(Pooling pooling) { return pooling == Pooling::mean ? "mean" : "last"; }

Expected<Pooling> parse_pooling(std::string_view text) {
  if (text == "last") return Pooling::last;
  if (text == "mean") return Pooling::mean;
  return make_error(Errc::invalid_argument, "must be last or mean, not '" + std::string(text) + "'");
}

void pool_and_normalize(const float* hidden, int32_t n_tokens, int32_t dim, Pooling pooling, float* out) {
  if (pooling == Pooling::last) {
    const float* row = hidden + int64_t(n_tokens - 1) * dim;
    for (int32_t i = 0; i < dim; ++i) out[i] = row[i];
  } else {
    // Sums in double: a long input's mean does not drift with its length.
    std::vector<double> sum(size_t(dim), 0.0);
    for (int32_t t = 0; t < n_tokens; ++t)
      for (int32_t i = 0; i < dim; ++i) sum[size_t(i)] += hidden[int64_t(t) * dim + i];
    for (int32_t i = 0; i < dim; ++i) out[i] = float(sum[size_t(i)] / n_tokens);
  }
  // As llama.cpp's common_embd_normalize(..., 2): the norm in double.
  double squares = 0.0;
  for (int32_t i = 0; i < dim; ++i) squares += double(out[i]) * out[i];
  const double norm = std::sqrt(squares);
  const float scale = norm > 0.0 ? float(1.0 / norm) : 0.0f;
  for (int32_t i = 0; i < dim; ++i) out[i] *= scale;
}

Status check_embedding_inputs(const std::vector<std::vector<int32_t>>& inputs, int32_t context_length,
                              int32_t vocab_size) {
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::vector<int32_t>& in = inputs[i];
    const std::string which = "input " + std::to_string(i);
    if (in.empty()) return make_error(Errc::invalid_argument, which + " is empty");
    if (int64_t(in.size()) > context_length)
      return make_error(Errc::invalid_argument, which + " has " + std::to_string(in.size()) +
                                                    " tokens, more than the model's context of " +
                                                    std::to_string(context_length));
    for (int32_t id : in)
      if (id < 0 || id >= vocab_size)
        return make_error(Errc::invalid_argument, which + " holds token id " + std::to_string(id) +
                                                      ", outside [0, " + std::to_string(vocab_size) + ")");
  }
  return Status::ok();
}

std::vector<std::pair<size_t, size_t>> embedding_batches(const std::vector<std::vector<int32_t>>& inputs,
                                                         int64_t max_tokens) {
  std::vector<std::pair<size_t, size_t>> batches;
  for (size_t first = 0; first < inputs.size();) {
    size_t last = first + 1;
    int64_t tokens = int64_t(inputs[first].size());
    while (last < inputs.size() && tokens + int64_t(inputs[last].size()) <= max_tokens)
      tokens += int64_t(inputs[last++].size());
    batches.emplace_back(first, last);
    first = last;
  }
  return batches;
}

int32_t embedding_batch(const std::vector<std::vector<int32_t>>& inputs, size_t first, size_t last,
                        int32_t block_size, std::vector<int32_t>& table, ForwardBatch& batch) {
  int32_t blocks = 0;
  for (size_t i = first; i < last; ++i) blocks += (int32_t(inputs[i].size()) + block_size - 1) / block_size;
  table.resize(size_t(blocks));
  std::iota(table.begin(), table.end(), 0);
  batch.clear();
  int32_t next_block = 0;
  for (size_t i = first; i < last; ++i) {
    const int32_t n = int32_t(inputs[i].size()), n_blocks = (n + block_size - 1) / block_size;
    batch.add_sequence(inputs[i], 0, std::span(table).subspan(size_t(next_block), size_t(n_blocks)), 0, n);
    next_block += n_blocks;
  }
  return blocks;
}

}  // namespace conveyor
