// RMSNorm: out = x / sqrt(mean(x²) + eps) · weight, row by row.
#pragma once

#include <cstdint>

namespace conveyor::kernels {

// In place is allowed (out == x with ldo == ldx).
void rmsnorm(const float* x,  // [n, ldx], first dim columns read
             int64_t ldx, int32_t n, int32_t dim,
             const float* weight,  // [dim]
             float eps,
             float* out,  // [n, ldo]
             int64_t ldo);

}  // namespace conveyor::kernels
