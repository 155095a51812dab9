#include "kernels/cpu/matmul_blas.hpp"

#include <cblas.h>

namespace conveyor::kernels {

void matmul_blas(const float* x, int64_t ldx, int32_t n, const float* w, int32_t m, int32_t k,
                 float* y, int64_t ldy, bool accumulate) {
  if (n <= 0 || m <= 0) return;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, m, k, 1.0f, x, int(ldx), w, k,
              accumulate ? 1.0f : 0.0f, y, int(ldy));
}

}  // namespace conveyor::kernels
