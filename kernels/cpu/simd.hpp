// Portable vector helpers for the CPU kernels (internal to kernels/cpu).
//
// GCC vector extensions rather than intrinsics: with -march=native on an
// AVX-512 machine f32x16 is one zmm register, f32x8 one ymm with AVX2;
// elsewhere the compiler splits them into what the target has, so the
// kernels build everywhere (slowly, in large kernels: matmul_packed.inc and
// paged_attention.inc use the target's own width).
//
// The functions are in an unnamed namespace: files compiled for different
// instruction sets include this (matmul_packed.inc, paged_attention.inc), and
// a copy that one of them did not inline (sanitizer and -O0 builds) must not
// stand in for the other's at link time, where a 64-byte vector even passes
// differently (in a zmm register with AVX-512, in memory without).
#pragma once

#include "kernels/fast_exp.hpp"

#include <cstdint>
#include <bit>

#if defined(__FMA__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace conveyor::kernels::simd {

typedef float f32x16 __attribute__((vector_size(64)));

// GCC warns (-Wpsabi) that a 64-byte vector passes differently with and
// without AVX-512: true of an exported function, but these have internal
// linkage, so no caller from another compilation can exist.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"
namespace {

typedef float f32x8 __attribute__((vector_size(32)));
typedef float f32x4 __attribute__((vector_size(16)));

inline f32x8 max8(f32x8 a, f32x8 b) { return a > b ? a : b; }
inline f32x4 max4(f32x4 a, f32x4 b) { return a > b ? a : b; }

// a·b + c rounded once where the compilation has the instruction. Kernels
// whose rows must get the same bits however they are blocked (the float
// product, attention's tiles) write their multiply-adds with it rather than
// leave them to the compiler's contraction of `c += a * b`, which can differ
// between a kernel's sizes: under AddressSanitizer, Clang split such
// statements at the checks of their loads and fused some, not others, so a
// row's bits depended on the rows computed with it.
[[gnu::always_inline]] inline f32x16 fused(f32x16 a, f32x16 b, f32x16 c) {
#if defined(__AVX512F__)
  return std::bit_cast<f32x16>(_mm512_fmadd_ps(std::bit_cast<__m512>(a), std::bit_cast<__m512>(b), std::bit_cast<__m512>(c)));
#else
  return a * b + c;  // the kernels use 16 lanes only where AVX-512 has them
#endif
}

[[gnu::always_inline]] inline f32x8 fused(f32x8 a, f32x8 b, f32x8 c) {
#if defined(__FMA__)
  return std::bit_cast<f32x8>(_mm256_fmadd_ps(std::bit_cast<__m256>(a), std::bit_cast<__m256>(b), std::bit_cast<__m256>(c)));
#else
  return a * b + c;
#endif
}

[[gnu::always_inline]] inline f32x4 fused(f32x4 a, f32x4 b, f32x4 c) {
#if defined(__FMA__)
  return std::bit_cast<f32x4>(_mm_fmadd_ps(std::bit_cast<__m128>(a), std::bit_cast<__m128>(b), std::bit_cast<__m128>(c)));
#else
  return a * b + c;
#endif
}

// Horizontal sum and max as a tree of halvings (a plain loop over the lanes
// compiles to dependent scalar adds); sixteen lanes fold into eight first.
inline float hsum(f32x8 v) {
  const f32x4 b = __builtin_shufflevector(v, v, 0, 1, 2, 3) + __builtin_shufflevector(v, v, 4, 5, 6, 7);
  const f32x4 c = b + __builtin_shufflevector(b, b, 2, 3, 0, 1);
  return c[0] + c[1];
}

inline float hsum(f32x16 v) {
  return hsum(f32x8(__builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7) +
                    __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15)));
}

inline float hmax(f32x8 v) {
  const f32x4 b = max4(__builtin_shufflevector(v, v, 0, 1, 2, 3), __builtin_shufflevector(v, v, 4, 5, 6, 7));
  const f32x4 c = max4(b, __builtin_shufflevector(b, b, 2, 3, 0, 1));
  return c[0] > c[1] ? c[0] : c[1];
}

inline float hmax(f32x16 v) {
  return hmax(max8(__builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7),
                   __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15)));
}

// Lane i of the result is the sum of a[i]'s lanes: sixteen horizontal sums at
// once, by a butterfly of pairwise folds (45 shuffles and adds, against some
// 130 for sixteen hsum calls). Each fold adds the two halves of every lane
// group of two vectors, halving the group and interleaving the two vectors'
// partial sums; the lanes come out in bit-reversed order and one last
// shuffle puts them in place.
inline f32x16 hsum16(const f32x16* a) {
  f32x16 b[8], c[4], d[2];
  for (int i = 0; i < 8; ++i)
    b[i] = __builtin_shufflevector(a[2 * i], a[2 * i + 1], 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23) +
           __builtin_shufflevector(a[2 * i], a[2 * i + 1], 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
  for (int i = 0; i < 4; ++i)
    c[i] = __builtin_shufflevector(b[2 * i], b[2 * i + 1], 0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27) +
           __builtin_shufflevector(b[2 * i], b[2 * i + 1], 4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31);
  for (int i = 0; i < 2; ++i)
    d[i] = __builtin_shufflevector(c[2 * i], c[2 * i + 1], 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29) +
           __builtin_shufflevector(c[2 * i], c[2 * i + 1], 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31);
  const f32x16 e = __builtin_shufflevector(d[0], d[1], 0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30) +
                   __builtin_shufflevector(d[0], d[1], 1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31);
  return __builtin_shufflevector(e, e, 0, 8, 4, 12, 2, 10, 6, 14, 1, 9, 5, 13, 3, 11, 7, 15);
}

// The same for eight vectors of eight lanes (one ymm each with AVX2): three
// folds, then the lanes back in place.
inline f32x8 hsum8(const f32x8* a) {
  f32x8 b[4], c[2];
  for (int i = 0; i < 4; ++i)
    b[i] = __builtin_shufflevector(a[2 * i], a[2 * i + 1], 0, 1, 2, 3, 8, 9, 10, 11) +
           __builtin_shufflevector(a[2 * i], a[2 * i + 1], 4, 5, 6, 7, 12, 13, 14, 15);
  for (int i = 0; i < 2; ++i)
    c[i] = __builtin_shufflevector(b[2 * i], b[2 * i + 1], 0, 1, 8, 9, 4, 5, 12, 13) +
           __builtin_shufflevector(b[2 * i], b[2 * i + 1], 2, 3, 10, 11, 6, 7, 14, 15);
  const f32x8 e = __builtin_shufflevector(c[0], c[1], 0, 8, 2, 10, 4, 12, 6, 14) +
                  __builtin_shufflevector(c[0], c[1], 1, 9, 3, 11, 5, 13, 7, 15);
  return __builtin_shufflevector(e, e, 0, 4, 2, 6, 1, 5, 3, 7);
}


// e^x (kernels/fast_exp.hpp), with a SIMD version for `#pragma omp simd`
// loops (the kernels are built with -fopenmp-simd).
#pragma omp declare simd notinbranch
inline float exp_fast(float x) { return kernels::exp_fast(x); }

typedef int32_t i32x16 __attribute__((vector_size(64)));

// exp_fast on a vector's lanes at once (F: a vector of floats, I: of as
// many int32s); the same arithmetic as the scalar version.
template <class F, class I>
inline F exp_fast_lanes(F x) {
  const F lo = F{} - 87.0f, hi = F{} + 88.0f;
  x = x < lo ? lo : (x > hi ? hi : x);
  constexpr float kRound = 12582912.0f;
  const F n = (x * 1.44269504088896341f + kRound) - kRound;
  F r = x - n * 0.693145751953125f;
  r = r - n * 1.428606765330187045e-06f;
  const F n_or_0 = n == n ? n : F{};  // NaN lanes: as the scalar version
  const I bits = (__builtin_convertvector(n_or_0, I) + 127) << 23;
  return kernels::exp_polynomial(r) * std::bit_cast<F>(bits);
}

typedef int32_t i32x8 __attribute__((vector_size(32)));

inline f32x16 exp_fast(f32x16 x) { return exp_fast_lanes<f32x16, i32x16>(x); }
inline f32x8 exp_fast(f32x8 x) { return exp_fast_lanes<f32x8, i32x8>(x); }

}  // namespace
#pragma GCC diagnostic pop
}  // namespace conveyor::kernels::simd
