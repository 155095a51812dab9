// Helpers shared by the CPU kernel tests: reproducible random data and an
// error measure.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace conveyor::kernels::testing {

inline std::vector<float> random_vector(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// max |a - b| / max |b|: the error relative to the reference's scale.
inline double relative_error(const float* a, const float* b, size_t n) {
  double diff = 0.0, scale = 0.0;
  for (size_t i = 0; i < n; ++i) {
    diff = std::max(diff, std::abs(double(a[i]) - double(b[i])));
    scale = std::max(scale, std::abs(double(b[i])));
  }
  return scale > 0.0 ? diff / scale : diff;
}

}  // namespace conveyor::kernels::testing
