// Where a token's keys and values go in the paged KV cache, and which
// sequence of a flattened batch a token belongs to: the index arithmetic of
// the CUDA KV-write and attention kernels (kv_cache.cu, paged_attention.cu),
// the layout of model/kv_cache.hpp and kernels/cpu/paged_attention.hpp.
#pragma once

#include "kernels/cuda/hd.hpp"

namespace conveyor::kernels::cuda {

// The sequence whose span holds batch token t: the last s with
// token_begin[s] <= t (empty spans before it are skipped that way).
// token_begin: [n_seqs + 1], non-decreasing; t < token_begin[n_seqs].
CONVEYOR_HD int32_t sequence_of_token(const int32_t* token_begin, int32_t n_seqs, int32_t t) {
  int32_t lo = 0, hi = n_seqs;  // answer in [lo, hi)
  while (hi - lo > 1) {
    const int32_t mid = (lo + hi) / 2;
    if (token_begin[mid] <= t) lo = mid;
    else hi = mid;
  }
  return lo;
}

// Element offset, from the start of one layer's keys (or values) in block 0,
// of head `head`'s slot for position `pos` of a sequence with block table
// `table`. block_stride: elements from a block to the next.
CONVEYOR_HD int64_t kv_slot(const int32_t* table, int32_t pos, int32_t head, int32_t block_size,
                            int32_t head_dim, int64_t block_stride) {
  return int64_t(table[pos / block_size]) * block_stride +
         (int64_t(head) * block_size + pos % block_size) * head_dim;
}

// How many positions token i of a span starting at start_pos attends to.
CONVEYOR_HD int32_t causal_context(int32_t start_pos, int32_t index_in_span) {
  return start_pos + index_in_span + 1;
}

}  // namespace conveyor::kernels::cuda
