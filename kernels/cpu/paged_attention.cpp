#include "kernels/cpu/paged_attention.hpp"

#include <omp.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/cpu/simd.hpp"

#if defined(__AVX512F__) || defined(__F16C__) || defined(__AVX512BF16__)
#include <immintrin.h>
#endif

namespace conveyor::kernels {

namespace {

// Query tokens per work item: a prefill chunk is split so both threads get
// work, while its keys stay in cache across the tile's tokens.
constexpr int32_t kTokenTile = 16;
// Work items wanted per thread, so dynamic scheduling can balance uneven spans.
constexpr int32_t kItemsPerThread = 8;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

struct SequenceView {
  int32_t first_token, n_tokens, start_pos;
  const int32_t* table;
};

SequenceView sequence(const SpanTable& spans, int32_t s) {
  return {spans.token_begin[s], spans.token_begin[s + 1] - spans.token_begin[s],
          spans.start_pos[s], spans.block_tables + spans.table_begin[s]};
}

// The kv heads [head_begin, head_end) of one query token, and its query heads
// (`group` per kv head), as one attention problem over positions [0, n_ctx).
struct TokenHeads {
  const float* q;  // [n_query_heads][head_dim], the first of them
  float* out;      // [n_query_heads][head_dim]
  int32_t head_begin, head_end, group, n_ctx;
};

// Online-softmax state, per query head of a TokenHeads: the running max, the
// running sum of exponentials, the unnormalized output, and one block's scores.
struct SoftmaxState {
  float* max;     // [n_query_heads]
  float* sum;     // [n_query_heads]
  float* acc;     // [n_query_heads][head_dim]
  float* scores;  // [n_query_heads][block_size rounded up to 16]

  static size_t floats(int32_t n_query_heads, int32_t head_dim, int32_t block_size) {
    const size_t bs16 = size_t(block_size + 15) / 16 * 16;
    return size_t(n_query_heads) * (2 + head_dim + bs16);
  }
  static SoftmaxState at(float* p, int32_t n_query_heads, int32_t head_dim) {
    return {p, p + n_query_heads, p + 2 * n_query_heads,
            p + 2 * n_query_heads + int64_t(n_query_heads) * head_dim};
  }
};

// ---- the cache's element types --------------------------------------------------
//
// Conversions between float and the cache's elements, 16 at a time and one at
// a time. Each has the instructions' version where the build targets them
// (AVX-512F or F16C for f16, AVX512-BF16 for bf16 writes) and a portable one
// (GCC vector extensions or kv_dtype.hpp's scalars) that gives the same bits.

template <KvDtype D>
struct ElemOf {
  using type = uint16_t;  // f16 and bf16 bits
};
template <>
struct ElemOf<KvDtype::f32> {
  using type = float;
};
template <>
struct ElemOf<KvDtype::q8_0> {
  using type = uint8_t;  // the bytes of blocks of 32 elements
};
template <KvDtype D>
using elem_t = typename ElemOf<D>::type;

// elem_t<D>s that `elems` elements take (a multiple of 32 for q8_0): offsets
// into the cache are counted in elements and moved to pointers with this.
template <KvDtype D>
constexpr int64_t units(int64_t elems) {
  if constexpr (D == KvDtype::q8_0) return elems / kQ8Block * kQ8BlockBytes;
  else return elems;
}

using simd::f32x16;
typedef float f32x8v __attribute__((vector_size(32)));
typedef uint16_t u16x16u __attribute__((vector_size(32), aligned(2), may_alias));
typedef uint16_t u16x16 __attribute__((vector_size(32)));
typedef uint32_t u32x16 __attribute__((vector_size(64)));
typedef int8_t i8x16u __attribute__((vector_size(16), aligned(1), may_alias));

// 16 elements, widened to float (exact).
template <KvDtype D>
inline f32x16 load16(const elem_t<D>* p) {
  if constexpr (D == KvDtype::f32) {
    return simd::load(p);
  } else if constexpr (D == KvDtype::bf16) {
    // A bf16 is a float's top half: widen and shift.
#if defined(__AVX512F__)
    // One vpmovzxwd into a zmm (the vector extension version below splits
    // it in two ymm halves under GCC's 256-bit preference); maskz forms, as
    // for f16 below.
    const __m512i w = _mm512_maskz_cvtepu16_epi32(
        __mmask16(0xffff), _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    return std::bit_cast<f32x16>(std::bit_cast<u32x16>(w) << 16);
#else
    const u32x16 w = __builtin_convertvector(*reinterpret_cast<const u16x16u*>(p), u32x16);
    return std::bit_cast<f32x16>(w << 16);
#endif
  } else {
#if defined(__AVX512F__)
    // The all-lanes masked form: the same instruction, without the plain
    // form's undefined pass-through that GCC 12 warns about
    // (-Wmaybe-uninitialized).
    return std::bit_cast<f32x16>(_mm512_maskz_cvtph_ps(
        __mmask16(0xffff), _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))));
#elif defined(__F16C__)
    const f32x8v lo = std::bit_cast<f32x8v>(_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
    const f32x8v hi =
        std::bit_cast<f32x8v>(_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 8))));
    return __builtin_shufflevector(lo, hi, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
#else
    // Exponent and mantissa moved into float position and rebiased; the
    // all-ones exponent (inf, NaN) rebiased once more; zero and subnormals
    // renormalized by one subtraction of 2^-14.
    const u32x16 h = __builtin_convertvector(*reinterpret_cast<const u16x16u*>(p), u32x16);
    const u32x16 exp = (h & 0x7c00u) << 13;
    u32x16 o = ((h & 0x7fffu) << 13) + 0x38000000u;
    o = exp == 0x0f800000u ? o + 0x38000000u : o;
    const f32x16 sub = std::bit_cast<f32x16>(o + 0x00800000u) - 0x1p-14f;
    o = exp == 0u ? std::bit_cast<u32x16>(sub) : o;
    return std::bit_cast<f32x16>(o | ((h & 0x8000u) << 16));
#endif
  }
}

// 16 floats, rounded to the element type (nearest even).
template <KvDtype D>
inline void store16(elem_t<D>* p, f32x16 v) {
  if constexpr (D == KvDtype::f32) {
    simd::store(p, v);
  } else if constexpr (D == KvDtype::bf16) {
#if defined(__AVX512BF16__)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p),
                        std::bit_cast<__m256i>(_mm512_cvtneps_pbh(std::bit_cast<__m512>(v))));
#else
    u32x16 x = std::bit_cast<u32x16>(v);
    const u32x16 abs = x & 0x7fffffffu;
    x = (x & 0x7f800000u) == 0u ? x & 0x80000000u : x;
    u32x16 r = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
    r = abs > 0x7f800000u ? (x >> 16) | 0x40u : r;
    *reinterpret_cast<u16x16u*>(p) = __builtin_convertvector(r, u16x16);
#endif
  } else {
#if defined(__AVX512F__)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p),
                        _mm512_maskz_cvtps_ph(__mmask16(0xffff), std::bit_cast<__m512>(v),
                                              _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
#elif defined(__F16C__)
    const f32x8v lo = __builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7);
    const f32x8v hi = __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p),
                     _mm256_cvtps_ph(std::bit_cast<__m256>(lo), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p + 8),
                     _mm256_cvtps_ph(std::bit_cast<__m256>(hi), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
#else
    for (int i = 0; i < 16; ++i) p[i] = kv_half::f32_to_f16(v[i]);
#endif
  }
}

template <KvDtype D>
inline float load1(const elem_t<D>* p) {
  if constexpr (D == KvDtype::f32) return *p;
  else if constexpr (D == KvDtype::bf16) return kv_half::bf16_to_f32(*p);
#if defined(__F16C__)
  else return _cvtsh_ss(*p);
#else
  else return kv_half::f16_to_f32(*p);
#endif
}

template <KvDtype D>
inline elem_t<D> store1(float x) {
  if constexpr (D == KvDtype::f32) return x;
  else if constexpr (D == KvDtype::bf16) return kv_half::f32_to_bf16(x);
#if defined(__F16C__)
  else return _cvtss_sh(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
#else
  else return kv_half::f32_to_f16(x);
#endif
}

// q8_0: a block's scale (its first two bytes, an f16).
inline float q8_scale(const uint8_t* block) {
  uint16_t d;
  std::memcpy(&d, block, sizeof d);
  return load1<KvDtype::f16>(&d);
}

// The 16 bytes q of one half of a block, as floats (unscaled).
inline f32x16 q8_raw16(const uint8_t* block, int half) {
  const uint8_t* q = block + 2 + 16 * half;
#if defined(__AVX512F__)
  // The all-lanes masked forms, as in load16 (GCC 12's -Wmaybe-uninitialized).
  const __mmask16 all = 0xffff;
  return std::bit_cast<f32x16>(_mm512_maskz_cvtepi32_ps(
      all, _mm512_maskz_cvtepi8_epi32(all, _mm_loadu_si128(reinterpret_cast<const __m128i*>(q)))));
#else
  return __builtin_convertvector(*reinterpret_cast<const i8x16u*>(q), f32x16);
#endif
}

inline f32x16 q8_load16(const uint8_t* block, int half) { return q8_raw16(block, half) * q8_scale(block); }

// 32 floats to one block: d = max|x| / 127 (stored as f16), q = x / d
// rounded to nearest even. A NaN becomes -127.
inline void q8_store_block(const float* x, uint8_t* block) {
  float amax = 0.0f;
  for (int i = 0; i < kQ8Block; ++i) amax = std::max(amax, std::fabs(x[i]));
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  const uint16_t dh = store1<KvDtype::f16>(d);
  std::memcpy(block, &dh, sizeof dh);
  for (int i = 0; i < kQ8Block; ++i) {
    const float v = std::nearbyint(x[i] * id);
    block[2 + i] = uint8_t(int8_t(v > 127.0f ? 127.0f : v >= -127.0f ? v : -127.0f));
  }
}

// The 16 elements [16·c, 16·c + 16) of a row, widened to float.
template <KvDtype D>
inline f32x16 chunk16(const elem_t<D>* row, int c) {
  if constexpr (D == KvDtype::q8_0) return q8_load16(row + (c / 2) * kQ8BlockBytes, c % 2);
  else return load16<D>(row + 16 * c);
}

// Element i of a row, widened to float.
template <KvDtype D>
inline float elem1(const elem_t<D>* row, int64_t i) {
  if constexpr (D == KvDtype::q8_0) {
    const uint8_t* block = row + i / kQ8Block * kQ8BlockBytes;
    return q8_scale(block) * float(int8_t(block[2 + i % kQ8Block]));
  } else {
    return load1<D>(row + i);
  }
}

template <KvDtype D>
void store_row(const float* src, elem_t<D>* dst, int64_t n) {
  if constexpr (D == KvDtype::q8_0) {
    for (int64_t i = 0; i < n; i += kQ8Block) q8_store_block(src + i, dst + units<D>(i));
  } else {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) store16<D>(dst + i, simd::load(src + i));
    for (; i < n; ++i) dst[i] = store1<D>(src[i]);
  }
}

template <KvDtype D>
void load_row(const elem_t<D>* src, float* dst, int64_t n) {
  if constexpr (D == KvDtype::q8_0) {
    for (int64_t i = 0; i < n; i += 16) simd::store(dst + i, chunk16<D>(src, int(i / 16)));
  } else {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) simd::store(dst + i, load16<D>(src + i));
    for (; i < n; ++i) dst[i] = load1<D>(src + i);
  }
}

// Asks for the cache lines of one row of hd elements (a hint: a row that
// straddles one more line than its size needs may miss its last).
template <KvDtype D>
inline void prefetch_row(const elem_t<D>* row, int32_t hd) {
  const char* p = reinterpret_cast<const char*>(row);
  for (size_t b = 0; b < kv_bytes(D, hd); b += 64) __builtin_prefetch(p + b, 0, 2);
}

// ---- attention ---------------------------------------------------------------

template <KvDtype D>
inline float dot(const float* a, const elem_t<D>* b, int32_t n) {
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int32_t i = 0; i < n; ++i) sum += a[i] * elem1<D>(b, i);
  return sum;
}

// Any head_dim, plain loops.
template <KvDtype D>
void attend_generic(const TokenHeads& t, const SequenceView& seq, const PagedKvView& kv,
                    float scale, const SoftmaxState& st) {
  const int32_t bs = kv.block_size, hd = kv.head_dim, bs16 = (bs + 15) / 16 * 16;
  const int32_t n_q = (t.head_end - t.head_begin) * t.group;
  std::fill_n(st.max, n_q, kNegInf);
  std::fill_n(st.sum, n_q, 0.0f);
  std::fill_n(st.acc, int64_t(n_q) * hd, 0.0f);
  for (int32_t j = 0, begin = 0; begin < t.n_ctx; ++j, begin += bs) {
    const int32_t n = std::min(bs, t.n_ctx - begin);
    for (int32_t h = t.head_begin; h < t.head_end; ++h) {
      const int64_t base = units<D>(int64_t(seq.table[j]) * kv.block_stride + int64_t(h) * bs * hd);
      const elem_t<D>* keys = static_cast<const elem_t<D>*>(kv.keys) + base;
      const elem_t<D>* values = static_cast<const elem_t<D>*>(kv.values) + base;
      for (int32_t g = 0; g < t.group; ++g) {
        const int32_t qh = (h - t.head_begin) * t.group + g;
        const float* q = t.q + int64_t(qh) * hd;
        float* sc = st.scores + int64_t(qh) * bs16;
        float* acc = st.acc + int64_t(qh) * hd;
        float block_max = kNegInf;
        for (int32_t s = 0; s < n; ++s) {
          sc[s] = dot<D>(q, keys + units<D>(int64_t(s) * hd), hd) * scale;
          block_max = std::max(block_max, sc[s]);
        }
        if (block_max > st.max[qh]) {
          // Rescale what was summed under the old maximum (nothing, the first time).
          const float correction =
              st.max[qh] == kNegInf ? 0.0f : simd::exp_fast(st.max[qh] - block_max);
          st.sum[qh] *= correction;
          for (int32_t d = 0; d < hd; ++d) acc[d] *= correction;
          st.max[qh] = block_max;
        }
        const float m = st.max[qh];
        float block_sum = 0.0f;
#pragma omp simd reduction(+ : block_sum)
        for (int32_t s = 0; s < n; ++s) {
          sc[s] = simd::exp_fast(sc[s] - m);
          block_sum += sc[s];
        }
        st.sum[qh] += block_sum;
        for (int32_t s = 0; s < n; ++s) {
          const float p = sc[s];
          const elem_t<D>* v = values + units<D>(int64_t(s) * hd);
#pragma omp simd
          for (int32_t d = 0; d < hd; ++d) acc[d] += p * elem1<D>(v, d);
        }
      }
    }
  }
  for (int32_t qh = 0; qh < n_q; ++qh) {
    const float inv = 1.0f / st.sum[qh];
    for (int32_t d = 0; d < hd; ++d) t.out[int64_t(qh) * hd + d] = st.acc[int64_t(qh) * hd + d] * inv;
  }
}

// One row of head_dim = 16·V elements widened to float in V vectors. For
// q8_0 the vectors hold the bytes unscaled and `scale` each block's scale
// (applied once per block by the dot product and the weighted sum below).
template <int V, KvDtype D>
struct WideRow {
  static constexpr bool kBlocks = D == KvDtype::q8_0 && V % 2 == 0;
  f32x16 x[V];
  float scale[kBlocks ? V / 2 : 1];

  explicit WideRow(const elem_t<D>* row) {
    if constexpr (kBlocks) {
      for (int b = 0; b < V / 2; ++b) {
        const elem_t<D>* block = row + b * kQ8BlockBytes;
        x[2 * b] = q8_raw16(block, 0);
        x[2 * b + 1] = q8_raw16(block, 1);
        scale[b] = q8_scale(block);
      }
    } else {
      for (int c = 0; c < V; ++c) x[c] = chunk16<D>(row, c);
    }
  }
  // Lanes of q·row (their sum is the dot product).
  f32x16 dot(const f32x16* q) const {
    if constexpr (kBlocks) {
      f32x16 a = (x[0] * q[0] + x[1] * q[1]) * scale[0];
      for (int b = 1; b < V / 2; ++b) a += (x[2 * b] * q[2 * b] + x[2 * b + 1] * q[2 * b + 1]) * scale[b];
      return a;
    } else {
      f32x16 a = x[0] * q[0];
      for (int c = 1; c < V; ++c) a += x[c] * q[c];
      return a;
    }
  }
  // acc += p · row.
  void add_to(f32x16* acc, float p) const {
    if constexpr (kBlocks) {
      for (int b = 0; b < V / 2; ++b) {
        const float pd = p * scale[b];
        acc[2 * b] += x[2 * b] * pd;
        acc[2 * b + 1] += x[2 * b + 1] * pd;
      }
    } else {
      for (int c = 0; c < V; ++c) acc[c] += x[c] * p;
    }
  }
};

// Query heads that share a key row per pass: each key and value row is
// widened once for all of them, and their queries (and then their output
// accumulators) stay in G·V of the 32 vector registers.
template <int V>
constexpr int kGroupTile = V <= 2 ? 8 : V <= 4 ? 4 : 2;

// One block of one kv head for G of its query heads, starting at query head
// qh0 (the item's numbering): scores, the online softmax update, and the
// weighted sum of the values.
template <int V, KvDtype D, int G>
inline void attend_block(const TokenHeads& t, int32_t qh0, float scale, const elem_t<D>* keys,
                         const elem_t<D>* values, const elem_t<D>* next_keys, const elem_t<D>* next_values,
                         bool prefetch, int32_t n, int32_t bs16, const SoftmaxState& st) {
  constexpr int32_t hd = 16 * V;
  constexpr int64_t row = units<D>(hd);
  f32x16 lane;
  for (int i = 0; i < 16; ++i) lane[i] = float(i);
  f32x16 qv[G][V];
  for (int g = 0; g < G; ++g)
    for (int c = 0; c < V; ++c) qv[g][c] = simd::load(t.q + int64_t(qh0 + g) * hd + 16 * c) * scale;
  // Scores 16 slots at a time: each slot's lanes of q·k per query head are
  // kept, and one butterfly (simd::hsum16) sums sixteen slots' lanes at once.
  // Slots past n sum zeros; the softmax below masks them anyway.
  f32x16 lanes[G][16];
  for (int32_t s0 = 0; s0 < n; s0 += 16) {
    const int32_t m = std::min<int32_t>(16, n - s0);
    for (int32_t i = 0; i < m; ++i) {
      const int32_t s = s0 + i;
      const WideRow<V, D> k(keys + s * row);
      for (int g = 0; g < G; ++g) lanes[g][i] = k.dot(qv[g]);
      if (prefetch) prefetch_row<D>(next_keys + s * row, hd);
    }
    for (int g = 0; g < G; ++g) {
      for (int32_t i = m; i < 16; ++i) lanes[g][i] = f32x16{};
      simd::store(st.scores + int64_t(qh0 + g) * bs16 + s0, simd::hsum16(lanes[g]));
    }
  }
  f32x16 acc[G][V];
  for (int g = 0; g < G; ++g) {
    const int32_t qh = qh0 + g;
    float* sc = st.scores + int64_t(qh) * bs16;
    f32x16 vmax = f32x16{} + kNegInf;
    for (int32_t c0 = 0; c0 < n; c0 += 16)
      vmax = simd::max16(vmax, lane < float(n - c0) ? simd::load(sc + c0) : vmax);
    const float block_max = simd::hmax(vmax);
    const float* acc_mem = st.acc + int64_t(qh) * hd;
    for (int c = 0; c < V; ++c) acc[g][c] = simd::load(acc_mem + 16 * c);
    if (block_max > st.max[qh]) {
      // Rescale what was summed under the old maximum (nothing, the first time).
      const float correction = st.max[qh] == kNegInf ? 0.0f : simd::exp_fast(st.max[qh] - block_max);
      st.sum[qh] *= correction;
      for (int c = 0; c < V; ++c) acc[g][c] *= correction;
      st.max[qh] = block_max;
    }
    const float m = st.max[qh];
    f32x16 vsum{};
    for (int32_t c0 = 0; c0 < n; c0 += 16) {
      const f32x16 e = simd::exp_fast(simd::load(sc + c0) - m);
      const f32x16 kept = lane < float(n - c0) ? e : f32x16{};
      simd::store(sc + c0, kept);
      vsum += kept;
    }
    st.sum[qh] += simd::hsum(vsum);
  }
  for (int32_t s = 0; s < n; ++s) {
    const WideRow<V, D> v(values + s * row);
    for (int g = 0; g < G; ++g) v.add_to(acc[g], st.scores[int64_t(qh0 + g) * bs16 + s]);
    if (prefetch) prefetch_row<D>(next_values + s * row, hd);
  }
  for (int g = 0; g < G; ++g)
    for (int c = 0; c < V; ++c) simd::store(st.acc + int64_t(qh0 + g) * hd + 16 * c, acc[g][c]);
}

// head_dim = 16·V: queries and output accumulators live in vector registers,
// and scores are reduced and exponentiated 16 at a time. Keys and values are
// widened to float 16 at a time as they are loaded, once for a tile of the
// query heads that share them (grouped-query attention).
//
// Blocks sit anywhere in the pool, so the hardware prefetchers cannot run
// ahead from one block to the next: while block j is computed, its loops pull
// block j + 1's keys and values (for all the item's heads, which are
// contiguous in the block) into L2, slot by slot.
template <int V, KvDtype D>
void attend_vec(const TokenHeads& t, const SequenceView& seq, const PagedKvView& kv, float scale,
                const SoftmaxState& st) {
  using E = elem_t<D>;
  constexpr int32_t hd = 16 * V;
  constexpr int G = kGroupTile<V>;
  const int32_t bs = kv.block_size, bs16 = (bs + 15) / 16 * 16;
  const int32_t n_q = (t.head_end - t.head_begin) * t.group;
  std::fill_n(st.max, n_q, kNegInf);
  std::fill_n(st.sum, n_q, 0.0f);
  std::fill_n(st.acc, int64_t(n_q) * hd, 0.0f);
  for (int32_t j = 0, begin = 0; begin < t.n_ctx; ++j, begin += bs) {
    const int32_t n = std::min(bs, t.n_ctx - begin);
    const int64_t block = int64_t(seq.table[j]) * kv.block_stride;
    // With no next block, prefetch this one again (cached, so nearly free).
    const int64_t next_block =
        begin + bs < t.n_ctx ? int64_t(seq.table[j + 1]) * kv.block_stride : block;
    for (int32_t h = t.head_begin; h < t.head_end; ++h) {
      const int64_t head = int64_t(h) * bs * hd;
      const E* keys = static_cast<const E*>(kv.keys) + units<D>(block + head);
      const E* values = static_cast<const E*>(kv.values) + units<D>(block + head);
      const E* next_keys = static_cast<const E*>(kv.keys) + units<D>(next_block + head);
      const E* next_values = static_cast<const E*>(kv.values) + units<D>(next_block + head);
      const int32_t qh_begin = (h - t.head_begin) * t.group;
      int32_t g = 0;
      for (; g + G <= t.group; g += G)
        attend_block<V, D, G>(t, qh_begin + g, scale, keys, values, next_keys, next_values, g == 0, n, bs16, st);
      for (; g < t.group; ++g)
        attend_block<V, D, 1>(t, qh_begin + g, scale, keys, values, next_keys, next_values, g == 0, n, bs16, st);
    }
  }
  for (int32_t qh = 0; qh < n_q; ++qh) {
    const float inv = 1.0f / st.sum[qh];
    for (int c = 0; c < V; ++c)
      simd::store(t.out + int64_t(qh) * hd + 16 * c,
                  simd::load(st.acc + int64_t(qh) * hd + 16 * c) * inv);
  }
}

using AttendFn = void (*)(const TokenHeads&, const SequenceView&, const PagedKvView&, float,
                          const SoftmaxState&);

template <KvDtype D>
AttendFn pick_attend(int32_t head_dim) {
  switch (head_dim) {
    case 16: return &attend_vec<1, D>;
    case 32: return &attend_vec<2, D>;
    case 48: return &attend_vec<3, D>;
    case 64: return &attend_vec<4, D>;
    case 80: return &attend_vec<5, D>;
    case 96: return &attend_vec<6, D>;
    case 112: return &attend_vec<7, D>;
    case 128: return &attend_vec<8, D>;
    default: return &attend_generic<D>;
  }
}

AttendFn pick_attend(int32_t head_dim, KvDtype dtype) {
  switch (dtype) {
    case KvDtype::f16: return pick_attend<KvDtype::f16>(head_dim);
    case KvDtype::bf16: return pick_attend<KvDtype::bf16>(head_dim);
    case KvDtype::q8_0: return pick_attend<KvDtype::q8_0>(head_dim);
    default: return pick_attend<KvDtype::f32>(head_dim);
  }
}

template <KvDtype D>
void write_kv_as(const float* k, const float* v, int64_t ld, const SpanTable& spans,
                 const PagedKvView& kv) {
  const int32_t bs = kv.block_size, hd = kv.head_dim;
  elem_t<D>* keys = static_cast<elem_t<D>*>(kv.keys);
  elem_t<D>* values = static_cast<elem_t<D>*>(kv.values);
  for (int32_t s = 0; s < spans.n_seqs; ++s) {
    const SequenceView seq = sequence(spans, s);
    for (int32_t i = 0; i < seq.n_tokens; ++i) {
      const int32_t pos = seq.start_pos + i, t = seq.first_token + i;
      const int64_t slot = int64_t(seq.table[pos / bs]) * kv.block_stride + (pos % bs) * hd;
      for (int32_t h = 0; h < kv.n_kv_heads; ++h) {
        const int64_t dst = units<D>(slot + int64_t(h) * bs * hd);
        if constexpr (D == KvDtype::f32) {
          std::memcpy(keys + dst, k + t * ld + int64_t(h) * hd, sizeof(float) * size_t(hd));
          std::memcpy(values + dst, v + t * ld + int64_t(h) * hd, sizeof(float) * size_t(hd));
        } else {
          store_row<D>(k + t * ld + int64_t(h) * hd, keys + dst, hd);
          store_row<D>(v + t * ld + int64_t(h) * hd, values + dst, hd);
        }
      }
    }
  }
}

}  // namespace

void kv_store(KvDtype dtype, const float* src, void* dst, int64_t n) {
  switch (dtype) {
    case KvDtype::f16: return store_row<KvDtype::f16>(src, static_cast<uint16_t*>(dst), n);
    case KvDtype::bf16: return store_row<KvDtype::bf16>(src, static_cast<uint16_t*>(dst), n);
    case KvDtype::q8_0: return store_row<KvDtype::q8_0>(src, static_cast<uint8_t*>(dst), n);
    default: std::memcpy(dst, src, sizeof(float) * size_t(n));
  }
}

void kv_load(KvDtype dtype, const void* src, float* dst, int64_t n) {
  switch (dtype) {
    case KvDtype::f16: return load_row<KvDtype::f16>(static_cast<const uint16_t*>(src), dst, n);
    case KvDtype::bf16: return load_row<KvDtype::bf16>(static_cast<const uint16_t*>(src), dst, n);
    case KvDtype::q8_0: return load_row<KvDtype::q8_0>(static_cast<const uint8_t*>(src), dst, n);
    default: std::memcpy(dst, src, sizeof(float) * size_t(n));
  }
}

void write_kv(const float* k, const float* v, int64_t ld, const SpanTable& spans,
              const PagedKvView& kv) {
  switch (kv.dtype) {
    case KvDtype::f16: return write_kv_as<KvDtype::f16>(k, v, ld, spans, kv);
    case KvDtype::bf16: return write_kv_as<KvDtype::bf16>(k, v, ld, spans, kv);
    case KvDtype::q8_0: return write_kv_as<KvDtype::q8_0>(k, v, ld, spans, kv);
    default: return write_kv_as<KvDtype::f32>(k, v, ld, spans, kv);
  }
}

void paged_attention(const float* q, int64_t ldq, int32_t n_heads, const SpanTable& spans,
                     const PagedKvView& kv, float* out, int64_t ldo,
                     AttentionWorkspace& workspace) {
  const int32_t n_kv = kv.n_kv_heads, group = n_heads / n_kv, hd = kv.head_dim;
  const int max_threads = omp_get_max_threads();
  // An item takes a run of kv heads: as many as still leaves every thread
  // kItemsPerThread items, since a block's heads are contiguous and one long
  // read streams better than several short ones.
  int64_t tiles = 0;
  for (int32_t s = 0; s < spans.n_seqs; ++s)
    tiles += (sequence(spans, s).n_tokens + kTokenTile - 1) / kTokenTile;
  const int32_t heads_per_item = int32_t(
      std::clamp<int64_t>(tiles * n_kv / (int64_t(kItemsPerThread) * max_threads), 1, n_kv));
  std::vector<int32_t>& items = workspace.items;
  items.clear();
  for (int32_t s = 0; s < spans.n_seqs; ++s) {
    const SequenceView seq = sequence(spans, s);
    for (int32_t h = 0; h < n_kv; h += heads_per_item)
      for (int32_t i = 0; i < seq.n_tokens; i += kTokenTile) items.insert(items.end(), {s, h, i});
  }
  const int32_t n_items = int32_t(items.size() / 3);
  const size_t per_thread =
      (SoftmaxState::floats(heads_per_item * group, hd, kv.block_size) + 15) / 16 * 16;
  if (workspace.scratch.size() < per_thread * max_threads)
    workspace.scratch.resize(per_thread * max_threads);
  const float scale = 1.0f / std::sqrt(float(hd));
  const AttendFn attend = pick_attend(hd, kv.dtype);

#pragma omp parallel if (n_items > 1)
  {
    const SoftmaxState state = SoftmaxState::at(
        workspace.scratch.data() + per_thread * omp_get_thread_num(), heads_per_item * group, hd);
#pragma omp for schedule(dynamic, 2)
    for (int32_t item = 0; item < n_items; ++item) {
      const int32_t s = items[3 * item], h0 = items[3 * item + 1], first = items[3 * item + 2];
      const int32_t h1 = std::min(n_kv, h0 + heads_per_item);
      const SequenceView seq = sequence(spans, s);
      const int32_t last = std::min(seq.n_tokens, first + kTokenTile);
      for (int32_t i = first; i < last; ++i) {
        const int64_t t = seq.first_token + i;
        const int64_t col = int64_t(h0) * group * hd;
        attend({q + t * ldq + col, out + t * ldo + col, h0, h1, group, seq.start_pos + i + 1}, seq,
               kv, scale, state);
      }
    }
  }
}

}  // namespace conveyor::kernels
