// e^x in float without libm, written once for every place that must compute
// the same floats: the CPU kernels (kernels/cpu/simd.hpp: SwiGLU, attention),
// the CPU sampler (model/sampling/filters.hpp) and the CUDA kernels that are
// checked bit for bit against them (kernels/cuda/hd.hpp, sampling_math.hpp).
//
// Both functions are Cephes' expf: x = n ln2 + r with |r| <= ln2 / 2, e^r by
// a degree-5 polynomial (within about 2 ulp), 2^n put straight into the
// exponent bits. They differ in how they reduce x, and each caller's twin
// depends on its exact rounding, so both are kept.
//
// Compiled as __host__ __device__ under nvcc and as plain inline C++ under
// the host compiler; nothing here includes CUDA.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define CONVEYOR_HD __host__ __device__ __forceinline__
#else
// Always inlined: files compiled for different instruction sets use these on
// vectors (kernels/cpu/simd.hpp), and no file's out-of-line copy may serve
// another's.
#define CONVEYOR_HD inline __attribute__((always_inline))
#endif

namespace conveyor::kernels {

// e^r for |r| <= ln2 / 2. T is float or a GCC vector of floats (the same
// operations in every lane). Always inlined, so a 64-byte vector never
// crosses a call: GCC's -Wpsabi note about passing one without AVX-512 does
// not apply.
#if defined(__GNUC__) && !defined(__CUDACC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"
#endif
template <class T>
CONVEYOR_HD T exp_polynomial(T r) {
  T p = T{} + 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  return p * r * r + r + 1.0f;
}
#if defined(__GNUC__) && !defined(__CUDACC__)
#pragma GCC diagnostic pop
#endif

// 2^n for an integral n in [-126, 127].
CONVEYOR_HD float exp2_integral(float n) {
  const int32_t bits = (int32_t(n) + 127) << 23;
#if defined(__CUDA_ARCH__)
  return __int_as_float(bits);
#else
  return std::bit_cast<float>(bits);
#endif
}

// e^x with no branches, so loops over it vectorize (the CPU kernels declare
// a SIMD version, kernels/cpu/simd.hpp) and warps do not diverge (CUDA). x is
// clamped to [-87, 88]: below, the result is about 1e-38 instead of 0;
// above, about 1.6e38 instead of inf. NaN stays NaN.
CONVEYOR_HD float exp_fast(float x) {
  x = x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x);
  // Round to nearest by adding and subtracting 1.5·2^23 (roundf would be a
  // libm call, which stops the loop from vectorizing).
  constexpr float kRound = 12582912.0f;
  const float n = (x * 1.44269504088896341f + kRound) - kRound;
  // Cody-Waite: r = x - n·ln2 with ln2 split into an exact and a small part.
  float r = x - n * 0.693145751953125f;
  r = r - n * 1.428606765330187045e-06f;
  // A NaN x passes the clamp and stays NaN through the polynomial;
  // converting a NaN n to an integer is undefined (UBSan, from a GGUF file
  // with NaN weights).
  return exp_polynomial(r) * exp2_integral(n == n ? n : 0.0f);
}

// e^x for the sampler's weights, x = (logit - max) / T <= 0: exactly 0 below
// -87.3 and for NaN, so a token far below the best one weighs nothing.
CONVEYOR_HD float exp_nonpositive(float x) {
  const float clamped = x >= -87.3f ? x : -87.3f;
  const float n = floorf(clamped * 1.44269504f + 0.5f);
  const float r = clamped - n * 0.693359375f + n * 2.12194440e-4f;
  return x >= -87.3f ? exp_polynomial(r) * exp2_integral(n) : 0.0f;  // NaN fails the test too
}

}  // namespace conveyor::kernels
