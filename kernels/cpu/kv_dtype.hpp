// The element type of the paged KV cache, and scalar conversions between
// float32 and the two half-size types.
//
// q8_0 stores elements in blocks of 32 as llama.cpp's block_q8_0 does: an f16
// scale d and 32 signed bytes q, the value being d·q (34 bytes for 32
// elements, 1.0625 bytes each). A row of the cache (one head's head_dim
// elements) is head_dim / 32 such blocks, so a head size that is not a
// multiple of 32 cannot use it. Writing a block takes d = max|x| / 127 and
// q = x / d rounded to nearest even; reading widens d·q exactly.
//
// f32 keeps keys and values as computed. f16 (IEEE binary16: 10-bit mantissa,
// largest finite value 65504) and bf16 (the top half of a float32: 7-bit
// mantissa, float32's range) halve the cache's bytes, and so the bytes that
// attention reads per step. Writes round to nearest, ties to even; reads
// widen exactly. The vector paths (kernels/cpu/paged_attention.cpp: F16C,
// AVX512-BF16) give the same bits as the scalar functions here, which are
// also the fallback on machines without those instructions:
//   - f16: a float above 65504 (after rounding) becomes infinity; NaN stays
//     NaN; results below 2^-14 are subnormal halves, as vcvtps2ph makes them.
//   - bf16: NaN stays NaN (quiet); float32 subnormals (below 1.2e-38) become
//     zero of the same sign, as vcvtneps2bf16 makes them.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>

namespace conveyor::kernels {

enum class KvDtype : uint8_t { f32, f16, bf16, q8_0 };

// q8_0's block: elements per block and bytes per block.
constexpr int64_t kQ8Block = 32;
constexpr int64_t kQ8BlockBytes = 2 + kQ8Block;

// Bytes of n consecutive elements (for q8_0, n a multiple of kQ8Block).
constexpr size_t kv_bytes(KvDtype d, int64_t n) {
  switch (d) {
    case KvDtype::f32: return size_t(n) * 4;
    case KvDtype::q8_0: return size_t(n / kQ8Block * kQ8BlockBytes);
    default: return size_t(n) * 2;
  }
}

// Whether rows of `head_dim` elements can be stored as `d`.
constexpr bool kv_dtype_fits(KvDtype d, int64_t head_dim) {
  return d != KvDtype::q8_0 || head_dim % kQ8Block == 0;
}

constexpr const char* kv_dtype_name(KvDtype d) {
  switch (d) {
    case KvDtype::f32: return "f32";
    case KvDtype::f16: return "f16";
    case KvDtype::bf16: return "bf16";
    default: return "q8_0";
  }
}

// Always inlined: attention's compilations for different instruction sets
// use them (paged_attention.inc), and no file's copy may serve another's.
namespace kv_half {

[[gnu::always_inline]] inline uint16_t f32_to_f16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t abs = x & 0x7fffffffu;
  if (abs > 0x7f800000u) return uint16_t(sign | 0x7e00u | ((abs >> 13) & 0x3ffu));  // NaN, quiet
  if (abs >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // rounds to 65536 or more: infinity
  if (abs < 0x38800000u) {
    // Below 2^-14: a subnormal half, a multiple of 2^-24. Adding 0.5 (whose
    // ulp is 2^-24) rounds to that multiple, to nearest even, in the FPU.
    const float r = std::bit_cast<float>(abs) + 0.5f;
    return uint16_t(sign | (std::bit_cast<uint32_t>(r) - 0x3f000000u));
  }
  // Normal: round the 13 dropped mantissa bits to nearest even (a carry
  // moves into the exponent, as it should), then rebias the exponent.
  const uint32_t rounded = abs + 0xfffu + ((abs >> 13) & 1u);
  return uint16_t(sign | ((rounded - 0x38000000u) >> 13));
}

[[gnu::always_inline]] inline float f16_to_f32(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t exp = h & 0x7c00u, mant = h & 0x3ffu;
  if (exp == 0x7c00u) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));  // inf, NaN
  if (exp == 0) {  // zero or subnormal: mant · 2^-24, exact in float
    const float v = float(mant) * 0x1p-24f;
    return std::bit_cast<float>(sign | std::bit_cast<uint32_t>(v));
  }
  return std::bit_cast<float>(sign | ((uint32_t(h & 0x7fffu) << 13) + 0x38000000u));
}

[[gnu::always_inline]] inline uint16_t f32_to_bf16(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return uint16_t((x >> 16) | 0x40u);  // NaN, quiet
  if ((x & 0x7f800000u) == 0) x &= 0x80000000u;  // subnormal: signed zero
  return uint16_t((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

[[gnu::always_inline]] inline float bf16_to_f32(uint16_t b) { return std::bit_cast<float>(uint32_t(b) << 16); }

}  // namespace kv_half
}  // namespace conveyor::kernels
