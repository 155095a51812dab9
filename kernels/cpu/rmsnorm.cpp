#include "kernels/cpu/rmsnorm.hpp"

#include <cmath>

namespace conveyor::kernels {

void rmsnorm(const float* x, int64_t ldx, int32_t n, int32_t dim, const float* weight, float eps,
             float* out, int64_t ldo) {
  // A row is a few hundred floats: threads pay only for large prefill batches.
#pragma omp parallel for schedule(static) if (int64_t(n) * dim > (int64_t(1) << 16))
  for (int32_t t = 0; t < n; ++t) {
    const float* row = x + t * ldx;
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int32_t i = 0; i < dim; ++i) sum += row[i] * row[i];
    const float inv = 1.0f / std::sqrt(sum / float(dim) + eps);
    float* o = out + t * ldo;
#pragma omp simd
    for (int32_t i = 0; i < dim; ++i) o[i] = row[i] * inv * weight[i];
  }
}

}  // namespace conveyor::kernels
