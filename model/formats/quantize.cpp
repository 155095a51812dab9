// ggml's reference quantizers (ggml/src/ggml-quants.c), re-implemented.
//
// Exactness matters here: the K-quant scale searches compare sums of squared
// errors, so a different order of float operations, a fused multiply-add, or a
// different rounding picks a different scale in some blocks. Every expression
// below keeps ggml's operand order, and this file is compiled with
// -ffp-contract=off (model/formats/CMakeLists.txt), as ggml's reference code
// is (a plain C build of ggml-base has no FMA).
#include "model/formats/quantize.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cpu/quant_formats.hpp"
#include "model/formats/tensor_convert.hpp"

namespace conveyor {

namespace {

using kernels::BlockQ4_0;
using kernels::BlockQ4_K;
using kernels::BlockQ5_K;
using kernels::BlockQ6_K;
using kernels::BlockQ8_0;
using kernels::kQK;

// ggml's GROUP_MAX_EPS: a group whose largest magnitude is below this is zero.
constexpr float kGroupMaxEps = 1e-15f;

// ggml's nearest_int: round to nearest, ties to even, for |f| <= 2^22 - 1
// (by adding 1.5 * 2^23 and reading the mantissa). Larger or non-finite
// values give some int, as in ggml.
int nearest_int(float f) {
  const float v = f + 12582912.0f;
  int32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  return (bits & 0x007fffff) - 0x00400000;
}

float f16_value(uint16_t h) { return kernels::fp16_to_f32(h); }

template <class Block>
void store_block(const Block& block, uint8_t* dst) {
  std::memcpy(dst, &block, sizeof block);
}

// ggml's make_qkx2_quants with use_mad = false: levels L[i] in [0, nmax] and a
// scale s and offset m with x[i] ~ s * L[i] - m, minimizing the weighted
// squared error over nstep + 1 candidate scales around nmax / (max - min).
// Returns s and stores m (>= 0) in *the_min; Laux is scratch of n entries.
float make_qkx2_quants(int n, int nmax, const float* x, const float* weights, uint8_t* L,
                       float* the_min, uint8_t* Laux, float rmin, float rdelta, int nstep) {
  float min = x[0];
  float max = x[0];
  float sum_w = weights[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    const float w = weights[i];
    sum_w += w;
    sum_x += w * x[i];
  }
  if (min > 0) min = 0;
  if (max == min) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    *the_min = -min;
    return 0.0f;
  }
  float iscale = float(nmax) / (max - min);
  float scale = 1 / iscale;
  float best_error = 0;
  for (int i = 0; i < n; ++i) {
    const int l = nearest_int(iscale * (x[i] - min));
    L[i] = uint8_t(std::max(0, std::min(nmax, l)));
    float diff = scale * float(L[i]) + min - x[i];
    diff = diff * diff;
    best_error += weights[i] * diff;
  }
  for (int is = 0; is <= nstep; ++is) {
    iscale = (rmin + rdelta * float(is) + float(nmax)) / (max - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      int l = nearest_int(iscale * (x[i] - min));
      l = std::max(0, std::min(nmax, l));
      Laux[i] = uint8_t(l);
      const float w = weights[i];
      sum_l += w * float(l);
      sum_l2 += w * float(l) * float(l);
      sum_xl += w * float(l) * x[i];
    }
    const float D = sum_w * sum_l2 - sum_l * sum_l;
    if (D > 0) {
      float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
      float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
      if (this_min > 0) {
        this_min = 0;
        this_scale = sum_xl / sum_l2;
      }
      float error = 0;
      for (int i = 0; i < n; ++i) {
        float diff = this_scale * float(Laux[i]) + this_min - x[i];
        diff = diff * diff;
        error += weights[i] * diff;
      }
      if (error < best_error) {
        for (int i = 0; i < n; ++i) L[i] = Laux[i];
        best_error = error;
        scale = this_scale;
        min = this_min;
      }
    }
  }
  *the_min = -min;
  return scale;
}

// ggml's make_qx_quants with rmse_type = 1 and no importance weights: signed
// levels stored as L[i] = l + nmax with l in [-nmax, nmax - 1], and the scale
// s with x[i] ~ s * l, chosen among 19 candidates by the error weighted with
// x[i]^2. An all-zero group gets L = 0 and scale 0.
float make_qx_quants(int n, int nmax, const float* x, int8_t* L) {
  float max = 0;
  float amax = 0;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  if (amax < kGroupMaxEps) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0.0f;
  }
  float iscale = float(-nmax) / max;
  float sumlx = 0;
  float suml2 = 0;
  for (int i = 0; i < n; ++i) {
    int l = nearest_int(iscale * x[i]);
    l = std::max(-nmax, std::min(nmax - 1, l));
    L[i] = int8_t(l + nmax);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * float(l);
    suml2 += w * float(l) * float(l);
  }
  float scale = suml2 != 0 ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    iscale = -(float(nmax) + 0.1f * float(is)) / max;
    sumlx = suml2 = 0;
    for (int i = 0; i < n; ++i) {
      int l = nearest_int(iscale * x[i]);
      l = std::max(-nmax, std::min(nmax - 1, l));
      const float w = x[i] * x[i];
      sumlx += w * x[i] * float(l);
      suml2 += w * float(l) * float(l);
    }
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      for (int i = 0; i < n; ++i) {
        const int l = nearest_int(iscale * x[i]);
        L[i] = int8_t(nmax + std::max(-nmax, std::min(nmax - 1, l)));
      }
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

// The shared first half of Q4_K and Q5_K: per sub-block of 32 a scale and a
// min from make_qkx2_quants (weighted by rms + |x|), both quantized to 6 bits
// against the super-block's largest (d = max scale / 63, dmin = max min / 63),
// then every value re-quantized to [0, nmax] against the stored scales.
template <class Block>
void k_quant_scales_and_levels(const float* x, int nmax, float rmin, int nstep, Block& y,
                               uint8_t* L) {
  uint8_t Laux[32];
  float weights[32];
  float mins[kQK / 32];
  float scales[kQK / 32];
  float max_scale = 0;  // the min is subtracted, so scales are positive
  float max_min = 0;
  for (int j = 0; j < kQK / 32; ++j) {
    float sum_x2 = 0;
    for (int l = 0; l < 32; ++l) sum_x2 += x[32 * j + l] * x[32 * j + l];
    const float av_x = std::sqrt(sum_x2 / 32);
    for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(x[32 * j + l]);
    scales[j] = make_qkx2_quants(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, rmin,
                                 0.1f, nstep);
    if (scales[j] > max_scale) max_scale = scales[j];
    if (mins[j] > max_min) max_min = mins[j];
  }
  const float inv_scale = max_scale > 0 ? 63.0f / max_scale : 0.0f;
  const float inv_min = max_min > 0 ? 63.0f / max_min : 0.0f;
  for (int j = 0; j < kQK / 32; ++j) {
    // Truncated to 8 bits before the clamp, as ggml does.
    const uint8_t ls = std::min<uint8_t>(63, uint8_t(nearest_int(inv_scale * scales[j])));
    const uint8_t lm = std::min<uint8_t>(63, uint8_t(nearest_int(inv_min * mins[j])));
    if (j < 4) {
      y.scales[j] = ls;
      y.scales[j + 4] = lm;
    } else {
      y.scales[j + 4] = uint8_t((ls & 0xF) | ((lm & 0xF) << 4));
      y.scales[j - 4] |= uint8_t((ls >> 4) << 6);
      y.scales[j] |= uint8_t((lm >> 4) << 6);
    }
  }
  y.d = float_to_half(max_scale / 63.0f);
  y.dmin = float_to_half(max_min / 63.0f);
  for (int j = 0; j < kQK / 32; ++j) {
    uint8_t sc, m;
    kernels::k_quant_scale_min(j, y.scales, &sc, &m);
    const float d = f16_value(y.d) * float(sc);
    if (d == 0) continue;  // keeps make_qkx2_quants' levels, as ggml does
    const float dm = f16_value(y.dmin) * float(m);
    for (int ii = 0; ii < 32; ++ii) {
      const int l = nearest_int((x[32 * j + ii] + dm) / d);
      L[32 * j + ii] = uint8_t(std::max(0, std::min(nmax, l)));
    }
  }
}

}  // namespace

void quantize_q8_0(const float* src, uint8_t* dst, size_t n) {
  for (size_t b = 0; b < n / 32; ++b, src += 32, dst += sizeof(BlockQ8_0)) {
    BlockQ8_0 y{};
    float amax = 0.0f;
    for (size_t j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(src[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y.d = float_to_half(d);
    for (size_t j = 0; j < 32; ++j) {
      const float q = std::round(src[j] * id);  // |q| <= 127 unless x is not finite
      y.qs[j] = int8_t(std::isfinite(q) ? std::clamp(q, -127.0f, 127.0f) : 0.0f);
    }
    store_block(y, dst);
  }
}

void quantize_q4_0(const float* src, uint8_t* dst, size_t n) {
  // q = trunc(x / d + 8.5) capped at 15, with d = -max / 8 where max is the
  // value of largest magnitude (so it maps to level 0 exactly).
  auto level = [](float v) -> uint8_t {
    const float t = v + 8.5f;
    if (!(t >= 0.0f)) return 0;  // only for non-finite input
    return t >= 15.0f ? 15 : uint8_t(int(t));
  };
  for (size_t b = 0; b < n / kQ4_0BlockSize; ++b, src += 32, dst += sizeof(BlockQ4_0)) {
    BlockQ4_0 y{};
    float amax = 0.0f;
    float max = 0.0f;
    for (int j = 0; j < 32; ++j) {
      if (amax < std::fabs(src[j])) {
        amax = std::fabs(src[j]);
        max = src[j];
      }
    }
    const float d = max / -8;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    y.d = float_to_half(d);
    for (int j = 0; j < 16; ++j)
      y.qs[j] = uint8_t(level(src[j] * id) | (level(src[16 + j] * id) << 4));
    store_block(y, dst);
  }
}

void quantize_q4_k(const float* src, uint8_t* dst, size_t n) {
  uint8_t L[kQK];
  for (size_t b = 0; b < n / kKQuantBlockSize; ++b, src += kQK, dst += sizeof(BlockQ4_K)) {
    BlockQ4_K y{};
    k_quant_scales_and_levels(src, 15, -1.0f, 20, y, L);
    uint8_t* q = y.qs;
    for (int j = 0; j < kQK; j += 64, q += 32)
      for (int l = 0; l < 32; ++l) q[l] = uint8_t(L[j + l] | (L[j + l + 32] << 4));
    store_block(y, dst);
  }
}

void quantize_q5_k(const float* src, uint8_t* dst, size_t n) {
  uint8_t L[kQK];
  for (size_t b = 0; b < n / kKQuantBlockSize; ++b, src += kQK, dst += sizeof(BlockQ5_K)) {
    BlockQ5_K y{};
    k_quant_scales_and_levels(src, 31, -0.5f, 15, y, L);
    // Low 4 bits in qs (two sub-blocks per 32 bytes); the fifth bit of
    // sub-blocks 2i and 2i+1 in bits 2i and 2i+1 of qh.
    uint8_t* ql = y.qs;
    uint8_t m1 = 1, m2 = 2;
    for (int j = 0; j < kQK; j += 64, ql += 32, m1 <<= 2, m2 <<= 2) {
      for (int l = 0; l < 32; ++l) {
        int l1 = L[j + l];
        if (l1 > 15) {
          l1 -= 16;
          y.qh[l] |= m1;
        }
        int l2 = L[j + l + 32];
        if (l2 > 15) {
          l2 -= 16;
          y.qh[l] |= m2;
        }
        ql[l] = uint8_t(l1 | (l2 << 4));
      }
    }
    store_block(y, dst);
  }
}

void quantize_q6_k(const float* src, uint8_t* dst, size_t n) {
  int8_t L[kQK];
  float scales[kQK / 16];
  for (size_t b = 0; b < n / kKQuantBlockSize; ++b, src += kQK, dst += sizeof(BlockQ6_K)) {
    BlockQ6_K y{};
    float max_scale = 0;
    float max_abs_scale = 0;
    for (int ib = 0; ib < kQK / 16; ++ib) {
      const float scale = make_qx_quants(16, 32, src + 16 * ib, L + 16 * ib);
      scales[ib] = scale;
      if (std::fabs(scale) > max_abs_scale) {
        max_abs_scale = std::fabs(scale);
        max_scale = scale;
      }
    }
    if (max_abs_scale < kGroupMaxEps) {  // an all-zero block: all bytes zero
      store_block(y, dst);
      continue;
    }
    const float iscale = -128.0f / max_scale;
    y.d = float_to_half(1 / iscale);
    for (int ib = 0; ib < kQK / 16; ++ib)
      y.scales[ib] = int8_t(std::max(-128, std::min(127, nearest_int(iscale * scales[ib]))));
    for (int j = 0; j < kQK / 16; ++j) {
      const float d = f16_value(y.d) * float(y.scales[j]);
      if (d == 0) continue;  // keeps make_qx_quants' levels, as ggml does
      for (int ii = 0; ii < 16; ++ii) {
        const int l = nearest_int(src[16 * j + ii] / d);
        L[16 * j + ii] = int8_t(std::max(-32, std::min(31, l)) + 32);
      }
    }
    // Levels 0..63: low 4 bits in ql, high 2 bits in qh, 128 values at a time.
    uint8_t* ql = y.ql;
    uint8_t* qh = y.qh;
    for (int j = 0; j < kQK; j += 128, ql += 64, qh += 32) {
      for (int l = 0; l < 32; ++l) {
        const uint8_t q1 = L[j + l] & 0xF, q2 = L[j + l + 32] & 0xF;
        const uint8_t q3 = L[j + l + 64] & 0xF, q4 = L[j + l + 96] & 0xF;
        ql[l] = uint8_t(q1 | (q3 << 4));
        ql[l + 32] = uint8_t(q2 | (q4 << 4));
        qh[l] = uint8_t((L[j + l] >> 4) | ((L[j + l + 32] >> 4) << 2) |
                        ((L[j + l + 64] >> 4) << 4) | ((L[j + l + 96] >> 4) << 6));
      }
    }
    store_block(y, dst);
  }
}

}  // namespace conveyor
