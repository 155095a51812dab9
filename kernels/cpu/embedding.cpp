#include "kernels/cpu/embedding.hpp"

#include <cstring>

#include "kernels/cpu/matmul.hpp"

namespace conveyor::kernels {

void embedding_lookup(const float* table, int32_t dim, const int32_t* tokens, int32_t n, float* out,
                      int64_t ldo) {
  for (int32_t t = 0; t < n; ++t)
    std::memcpy(out + t * ldo, table + int64_t(tokens[t]) * dim, sizeof(float) * size_t(dim));
}

void embedding_lookup_packed(const float* packed_table, int32_t dim, const int32_t* tokens,
                             int32_t n, float* out, int64_t ldo) {
  // Each row is a strided gather (one float per 64-byte line): spread it.
#pragma omp parallel for schedule(static) if (n >= 64)
  for (int32_t t = 0; t < n; ++t) unpack_row(packed_table, dim, tokens[t], out + t * ldo);
}

}  // namespace conveyor::kernels
