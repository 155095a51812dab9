// Per-element math of the CUDA RMSNorm, RoPE, SwiGLU and embedding kernels
// (elementwise.cu), shared with tests/kernels/cuda, which checks it against
// kernels/cpu/{rmsnorm,rope,swiglu}.hpp.
#pragma once

#include <cmath>

#include "kernels/cuda/hd.hpp"

namespace conveyor::kernels::cuda {

// RMSNorm (kernels/cpu/rmsnorm.hpp): a row's scale from its sum of squares,
// then each output element.
CONVEYOR_HD float rmsnorm_scale(float sum_squares, int32_t dim, float eps) {
  return 1.0f / sqrtf(sum_squares / float(dim) + eps);
}
CONVEYOR_HD float rmsnorm_apply(float x, float scale, float weight) { return x * scale * weight; }

// SwiGLU (kernels/cpu/swiglu.hpp): silu(gate) · up.
CONVEYOR_HD float swiglu(float gate, float up) { return gate / (1.0f + exp_fast(-gate)) * up; }

// RoPE (kernels/cpu/rope.hpp): pair i of a head is (first(i), first(i) + partner).
// adjacent: (2i, 2i + 1); split: (i, i + rotary_dim / 2).
CONVEYOR_HD int32_t rope_first(int32_t pair, bool adjacent) { return adjacent ? 2 * pair : pair; }
CONVEYOR_HD int32_t rope_partner(int32_t half, bool adjacent) { return adjacent ? 1 : half; }
// Turns (a, b) by the angle whose cosine and sine (both scaled, for YaRN)
// the table holds: table[(pos · half + pair) · 2 + {0, 1}].
CONVEYOR_HD void rope_rotate(float& a, float& b, float cos_angle, float sin_angle) {
  const float x0 = a, x1 = b;
  a = x0 * cos_angle - x1 * sin_angle;
  b = x0 * sin_angle + x1 * cos_angle;
}

// Embedding gather from a bf16 table (weights are uploaded as bf16).
CONVEYOR_HD float embedding_value(const uint16_t* table, int64_t dim, int32_t token, int64_t i) {
  return bf16_to_f32(table[int64_t(token) * dim + i]);
}

}  // namespace conveyor::kernels::cuda
