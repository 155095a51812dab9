// What the CUDA kernels' per-element math is written with: functions that
// compile as __host__ __device__ under nvcc and as plain inline C++ under the
// host compiler, so tests/kernels/cuda checks the arithmetic on machines
// without a GPU (against the CPU kernels, kernels/cpu).
//
// This header and the *_math.hpp beside it include nothing from CUDA.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/kv_dtype.hpp"  // kQ8Block, kQ8BlockBytes
#include "kernels/fast_exp.hpp"      // CONVEYOR_HD, exp_fast, exp_nonpositive

namespace conveyor::kernels::cuda {

CONVEYOR_HD uint32_t float_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
#endif
}

CONVEYOR_HD float bits_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}

// e^x: kernels/fast_exp.hpp's, the CPU kernels' own (SwiGLU, attention, the
// sampler's weights). Under nvcc, contraction into FMAs may move the last bit
// (sampling.cu is built with --fmad=false for this).
using kernels::exp_fast;
using kernels::exp_nonpositive;

// ---- the KV cache's element types (kernels/cpu/kv_dtype.hpp, bit for bit) ----

CONVEYOR_HD uint16_t f32_to_f16(float f) {
  const uint32_t x = float_bits(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t abs = x & 0x7fffffffu;
  if (abs > 0x7f800000u) return uint16_t(sign | 0x7e00u | ((abs >> 13) & 0x3ffu));  // NaN, quiet
  if (abs >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // rounds to 65536 or more: infinity
  if (abs < 0x38800000u) {
    // Below 2^-14: a subnormal half, a multiple of 2^-24; adding 0.5 (whose
    // ulp is 2^-24) rounds to it, to nearest even.
    const float r = bits_float(abs) + 0.5f;
    return uint16_t(sign | (float_bits(r) - 0x3f000000u));
  }
  const uint32_t rounded = abs + 0xfffu + ((abs >> 13) & 1u);
  return uint16_t(sign | ((rounded - 0x38000000u) >> 13));
}

CONVEYOR_HD float f16_to_f32(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t exp = h & 0x7c00u, mant = h & 0x3ffu;
  if (exp == 0x7c00u) return bits_float(sign | 0x7f800000u | (mant << 13));  // inf, NaN
  if (exp == 0) return bits_float(sign | float_bits(float(mant) * 5.9604644775390625e-8f));  // mant · 2^-24
  return bits_float(sign | ((uint32_t(h & 0x7fffu) << 13) + 0x38000000u));
}

CONVEYOR_HD uint16_t f32_to_bf16(float f) {
  uint32_t x = float_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return uint16_t((x >> 16) | 0x40u);  // NaN, quiet
  if ((x & 0x7f800000u) == 0) x &= 0x80000000u;  // subnormal: signed zero
  return uint16_t((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

CONVEYOR_HD float bf16_to_f32(uint16_t b) { return bits_float(uint32_t(b) << 16); }

// The KV dtypes as kernel template arguments: 0 f32, 1 f16, 2 bf16, 3 q8_0
// (the values of kernels::KvDtype).
template <int D>
struct KvElem {
  using type = uint16_t;
};
template <>
struct KvElem<0> {
  using type = float;
};
template <>
struct KvElem<3> {
  using type = uint8_t;  // the bytes of blocks of 32 elements
};

// ---- q8_0 (kernels/cpu/kv_dtype.hpp and paged_attention.cpp, bit for bit) ----
// Blocks of kQ8Block (32) elements: an f16 scale d (little-endian), then 32
// signed bytes q; the value is d·q. Element offsets (multiples of 32 at a
// row's start) become byte offsets with q8_bytes.

CONVEYOR_HD int64_t q8_bytes(int64_t elems) { return elems / kQ8Block * kQ8BlockBytes; }

// Element i (counted from a block's start) of the blocks at `base`.
CONVEYOR_HD float q8_load(const uint8_t* base, int64_t i) {
  const uint8_t* block = base + q8_bytes(i);
  return f16_to_f32(uint16_t(block[0] | (uint16_t(block[1]) << 8))) * float(int8_t(block[2 + i % kQ8Block]));
}

// A block's scale from its largest magnitude (NaNs ignored), and its
// reciprocal, as the CPU computes them.
CONVEYOR_HD float q8_delta(float amax) { return amax / 127.0f; }
CONVEYOR_HD float q8_inverse(float d) { return d != 0.0f ? 1.0f / d : 0.0f; }

// x·(1/d) rounded to nearest even and clamped to [-127, 127] (a NaN: -127).
CONVEYOR_HD uint8_t q8_quantize(float x, float inverse) {
  const float v = rintf(x * inverse);
  return uint8_t(int8_t(v > 127.0f ? 127.0f : v >= -127.0f ? v : -127.0f));
}

template <int D>
CONVEYOR_HD typename KvElem<D>::type kv_from_float(float x) {
  if constexpr (D == 0) return x;
  else if constexpr (D == 1) return f32_to_f16(x);
  else return f32_to_bf16(x);
}

template <int D>
CONVEYOR_HD float kv_to_float(typename KvElem<D>::type x) {
  if constexpr (D == 0) return x;
  else if constexpr (D == 1) return f16_to_f32(x);
  else return bf16_to_f32(x);
}

// Element i of the cache at `base` (one layer's keys or values, block 0),
// whatever its dtype.
template <int D>
CONVEYOR_HD float kv_load(const void* base, int64_t i) {
  if constexpr (D == 3) return q8_load(static_cast<const uint8_t*>(base), i);
  else return kv_to_float<D>(static_cast<const typename KvElem<D>::type*>(base)[i]);
}

}  // namespace conveyor::kernels::cuda
