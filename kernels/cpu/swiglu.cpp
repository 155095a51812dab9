#include "kernels/cpu/swiglu.hpp"

#include "kernels/cpu/simd.hpp"

namespace conveyor::kernels {

void swiglu(const float* gate, const float* up, int64_t ldg, int32_t n, int32_t hidden, float* out,
            int64_t ldo) {
#pragma omp parallel for schedule(static) if (int64_t(n) * hidden > (int64_t(1) << 16))
  for (int32_t t = 0; t < n; ++t) {
    const float* g = gate + t * ldg;
    const float* u = up + t * ldg;
    float* o = out + t * ldo;
#pragma omp simd
    for (int32_t i = 0; i < hidden; ++i) o[i] = g[i] / (1.0f + simd::exp_fast(-g[i])) * u[i];
  }
}

}  // namespace conveyor::kernels
