#include "kernels/cpu/rope.hpp"

#include <cmath>
#include <vector>

namespace conveyor::kernels {

void rope_table(float theta, int32_t rotary_dim, int32_t n_positions, float* table) {
  std::vector<double> freqs(size_t(rotary_dim / 2));
  for (size_t i = 0; i < freqs.size(); ++i) freqs[i] = std::pow(double(theta), -2.0 * double(i) / rotary_dim);
  rope_table(freqs, 1.0, n_positions, table);
}

void rope_table(std::span<const double> pair_freqs, double scale, int32_t n_positions,
                float* table) {
  const int64_t half = int64_t(pair_freqs.size());
  for (int32_t p = 0; p < n_positions; ++p)
    for (int64_t i = 0; i < half; ++i) {
      const double angle = p * pair_freqs[size_t(i)];
      table[(p * half + i) * 2] = float(std::cos(angle) * scale);
      table[(p * half + i) * 2 + 1] = float(std::sin(angle) * scale);
    }
}

void rope_apply(float* x, int64_t ldx, int32_t n_tokens, int32_t n_heads, int32_t head_dim,
                int32_t rotary_dim, RopeStyle style, const int32_t* positions,
                const float* table) {
  const int32_t half = rotary_dim / 2;
  // In the adjacent layout pair i is (2i, 2i + 1); in the split layout it is
  // (i, i + half). Both are one strided loop.
  const int32_t first_stride = style == RopeStyle::adjacent_pairs ? 2 : 1;
  const int32_t partner = style == RopeStyle::adjacent_pairs ? 1 : half;
#pragma omp parallel for schedule(static) if (int64_t(n_tokens) * n_heads * head_dim > (1 << 16))
  for (int32_t t = 0; t < n_tokens; ++t) {
    const float* cs = table + int64_t(positions[t]) * half * 2;
    for (int32_t h = 0; h < n_heads; ++h) {
      float* head = x + t * ldx + int64_t(h) * head_dim;
#pragma omp simd
      for (int32_t i = 0; i < half; ++i) {
        float* a = head + i * first_stride;
        const float x0 = a[0], x1 = a[partner];
        const float c = cs[2 * i], s = cs[2 * i + 1];
        a[0] = x0 * c - x1 * s;
        a[partner] = x0 * s + x1 * c;
      }
    }
  }
}

}  // namespace conveyor::kernels
