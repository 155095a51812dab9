// Embeddings: what a backend offers for POST /v1/embeddings.
//
// An embedding of a token sequence is the model's final hidden state (the
// output of the final RMSNorm, the vector the classifier reads) pooled over
// the sequence's tokens and scaled to unit L2 length, as llama.cpp's
// llama-embedding computes with --pooling last|mean --embd-normalize 2:
//   last  the last token's state: in a causal model the one token that has
//         attended to the whole input
//   mean  the mean of every token's state, BOS included
//
// A backend that can embed builds an Embedder beside its StepRunner
// (backends/backend.hpp: Backend::embedder, null where the backend cannot).
// An Embedder shares the runner's read-only weights but has its own scratch
// and KV memory, so it runs beside the engine's steps, outside the scheduler:
// its tokens are not in the engine's token budget. The server runs it on a
// worker thread of its own (http/work_queue.hpp), never on an I/O thread.
//
// Thread-safety: embed() may be called from any thread; calls run one at a
// time.
#pragma once

#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.hpp"
#include "model/batch.hpp"

namespace conveyor {

enum class Pooling : uint8_t { last, mean };

const char* to_string(Pooling pooling);
// "last" or "mean"; the error lists both.
Expected<Pooling> parse_pooling(std::string_view text);

class Embedder {
 public:
  virtual ~Embedder() = default;
  // Floats per embedding (the model's dim).
  virtual int32_t dim() const = 0;
  // One unit-length vector of dim() floats per input, in input order, computed
  // on the calling thread. Each input is 1 to context_length token ids below
  // vocab_size; any other is an invalid_argument error naming its index.
  virtual Expected<std::vector<std::vector<float>>> embed(const std::vector<std::vector<int32_t>>& inputs,
                                                          Pooling pooling) = 0;
};

// out = the pooled, unit-length embedding of one sequence whose final hidden
// states are `hidden` ([n_tokens, dim], row-major). A zero vector stays zero.
void pool_and_normalize(const float* hidden, int32_t n_tokens, int32_t dim, Pooling pooling, float* out);

// Embedder::embed's check of its inputs: each 1 to `context_length` ids in
// [0, vocab_size); the error (invalid_argument) names the first bad input.
Status check_embedding_inputs(const std::vector<std::vector<int32_t>>& inputs, int32_t context_length,
                              int32_t vocab_size);

// The inputs in consecutive batches [first, last) of whole inputs, each at
// most `max_tokens` tokens (an input longer than that is a batch alone).
std::vector<std::pair<size_t, size_t>> embedding_batches(const std::vector<std::vector<int32_t>>& inputs,
                                                         int64_t max_tokens);

// Inputs [first, last) as one forward batch without logits, each from
// position 0 in blocks of its own (`table` numbers them from 0): prompts
// that attend only to themselves. Returns the blocks the batch uses.
int32_t embedding_batch(const std::vector<std::vector<int32_t>>& inputs, size_t first, size_t last,
                        int32_t block_size, std::vector<int32_t>& table, ForwardBatch& batch);

}  // namespace conveyor
