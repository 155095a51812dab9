// Token embedding lookup: one table row per token.
#pragma once

#include <cstdint>

namespace conveyor::kernels {

// out[t] = table[tokens[t]]. Token ids must be in [0, vocab).
void embedding_lookup(const float* table,  // [vocab, dim]
                      int32_t dim,
                      const int32_t* tokens,  // [n]
                      int32_t n,
                      float* out,  // [n, ldo]
                      int64_t ldo);

// The same from a table packed by pack_matrix (kernels/cpu/matmul.hpp), so a
// tied classifier and the embedding share one copy of the weights.
void embedding_lookup_packed(const float* packed_table,  // [ceil(vocab / 16)][dim][16]
                             int32_t dim, const int32_t* tokens,  // [n]
                             int32_t n,
                             float* out,  // [n, ldo]
                             int64_t ldo);

}  // namespace conveyor::kernels
