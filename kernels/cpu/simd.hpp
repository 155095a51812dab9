// Portable vector helpers for the CPU kernels (internal to kernels/cpu).
//
// GCC vector extensions rather than intrinsics: with -march=native on an
// AVX-512 machine f32x16 is one zmm register; elsewhere the compiler splits it
// into what the target has, so the kernels build everywhere.
#pragma once

#include <cstdint>
#include <bit>

namespace conveyor::kernels::simd {

typedef float f32x16 __attribute__((vector_size(64)));
// Same, but without the 64-byte alignment requirement, for loads and stores.
typedef float f32x16u __attribute__((vector_size(64), aligned(4), may_alias));

inline f32x16 load(const float* p) { return *reinterpret_cast<const f32x16u*>(p); }
inline void store(float* p, f32x16 v) { *reinterpret_cast<f32x16u*>(p) = v; }

inline float hsum(f32x16 v) {
  float s = 0.0f;
  for (int i = 0; i < 16; ++i) s += v[i];
  return s;
}

// e^x, Cephes' expf polynomial (about 2 ulp) with no branches, so loops over
// it vectorize under `#pragma omp simd`. x is clamped to [-87, 88]: below,
// the result is about 1e-38 instead of 0; above, about 1.6e38 instead of inf.
#pragma omp declare simd notinbranch
inline float exp_fast(float x) {
  x = x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x);
  const float n = __builtin_roundf(x * 1.44269504088896341f);
  // Cody-Waite: r = x - n·ln2 with ln2 split into an exact and a small part.
  float r = x - n * 0.693145751953125f;
  r = r - n * 1.428606765330187045e-06f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float e = p * r * r + r + 1.0f;
  return e * std::bit_cast<float>((int32_t(n) + 127) << 23);
}

}  // namespace conveyor::kernels::simd
