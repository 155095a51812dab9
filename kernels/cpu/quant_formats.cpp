#include "kernels/cpu/quant_formats.hpp"

#include <cstring>

#include "kernels/cpu/kv_dtype.hpp"

namespace conveyor::kernels {

bool is_weight_type(uint32_t t) {
  switch (WeightType(t)) {
    case WeightType::f32:
    case WeightType::f16:
    case WeightType::bf16:
    case WeightType::q8_0:
    case WeightType::q4_0:
    case WeightType::q4_k:
    case WeightType::q5_k:
    case WeightType::q6_k:
      return true;
  }
  return false;
}

const char* weight_type_name(WeightType type) {
  switch (type) {
    case WeightType::f32: return "F32";
    case WeightType::f16: return "F16";
    case WeightType::bf16: return "BF16";
    case WeightType::q8_0: return "Q8_0";
    case WeightType::q4_0: return "Q4_0";
    case WeightType::q4_k: return "Q4_K";
    case WeightType::q5_k: return "Q5_K";
    case WeightType::q6_k: return "Q6_K";
  }
  return "?";
}

WeightTypeTraits weight_type_traits(WeightType type) {
  switch (type) {
    case WeightType::f32: return {1, 4};
    case WeightType::f16: return {1, 2};
    case WeightType::bf16: return {1, 2};
    case WeightType::q8_0: return {32, int32_t(sizeof(BlockQ8_0))};
    case WeightType::q4_0: return {32, int32_t(sizeof(BlockQ4_0))};
    case WeightType::q4_k: return {kQK, int32_t(sizeof(BlockQ4_K))};
    case WeightType::q5_k: return {kQK, int32_t(sizeof(BlockQ5_K))};
    case WeightType::q6_k: return {kQK, int32_t(sizeof(BlockQ6_K))};
  }
  return {1, 0};
}

float fp16_to_f32(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    const float magnitude = float(mant) * 0x1p-24f;  // zero or subnormal
    return sign ? -magnitude : magnitude;
  }
  if (exp == 31)
    bits = sign | 0x7f800000u | (mant ? 0x400000u | (mant << 13) : 0u);
  else
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t f32_to_fp16(float f) { return kv_half::f32_to_f16(f); }

namespace {

template <class Block>
const Block* blocks(const uint8_t* src) {
  return reinterpret_cast<const Block*>(src);
}

void dequant_q8_0(const BlockQ8_0* b, int64_t nb, float* y) {
  for (int64_t i = 0; i < nb; ++i, y += 32) {
    const float d = fp16_to_f32(b[i].d);
    for (int j = 0; j < 32; ++j) y[j] = d * float(b[i].qs[j]);
  }
}

void dequant_q4_0(const BlockQ4_0* b, int64_t nb, float* y) {
  for (int64_t i = 0; i < nb; ++i, y += 32) {
    const float d = fp16_to_f32(b[i].d);
    for (int j = 0; j < 16; ++j) {
      y[j] = d * float((b[i].qs[j] & 15) - 8);
      y[j + 16] = d * float((b[i].qs[j] >> 4) - 8);
    }
  }
}

void dequant_q4_k(const BlockQ4_K* b, int64_t nb, float* y) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = fp16_to_f32(b[i].d), dmin = fp16_to_f32(b[i].dmin);
    const uint8_t* q = b[i].qs;
    for (int j = 0; j < kQK / 64; ++j, q += 32) {
      uint8_t sc, m;
      k_quant_scale_min(2 * j, b[i].scales, &sc, &m);
      const float d1 = d * sc, m1 = dmin * m;
      k_quant_scale_min(2 * j + 1, b[i].scales, &sc, &m);
      const float d2 = d * sc, m2 = dmin * m;
      for (int l = 0; l < 32; ++l) *y++ = d1 * float(q[l] & 15) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * float(q[l] >> 4) - m2;
    }
  }
}

void dequant_q5_k(const BlockQ5_K* b, int64_t nb, float* y) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = fp16_to_f32(b[i].d), dmin = fp16_to_f32(b[i].dmin);
    const uint8_t* ql = b[i].qs;
    const uint8_t* qh = b[i].qh;
    uint8_t u1 = 1, u2 = 2;
    for (int j = 0; j < kQK / 64; ++j, ql += 32, u1 <<= 2, u2 <<= 2) {
      uint8_t sc, m;
      k_quant_scale_min(2 * j, b[i].scales, &sc, &m);
      const float d1 = d * sc, m1 = dmin * m;
      k_quant_scale_min(2 * j + 1, b[i].scales, &sc, &m);
      const float d2 = d * sc, m2 = dmin * m;
      for (int l = 0; l < 32; ++l) *y++ = d1 * float((ql[l] & 15) + (qh[l] & u1 ? 16 : 0)) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * float((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
    }
  }
}

void dequant_q6_k(const BlockQ6_K* b, int64_t nb, float* y) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = fp16_to_f32(b[i].d);
    const uint8_t* ql = b[i].ql;
    const uint8_t* qh = b[i].qh;
    const int8_t* sc = b[i].scales;
    for (int n = 0; n < kQK; n += 128, y += 128, ql += 64, qh += 32, sc += 8) {
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q1 = ((ql[l] & 15) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = ((ql[l + 32] & 15) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l] = d * float(sc[is]) * float(q1);
        y[l + 32] = d * float(sc[is + 2]) * float(q2);
        y[l + 64] = d * float(sc[is + 4]) * float(q3);
        y[l + 96] = d * float(sc[is + 6]) * float(q4);
      }
    }
  }
}

}  // namespace

void dequantize_row(WeightType type, const uint8_t* src, int64_t cols, float* dst) {
  const int64_t nb = cols / weight_type_traits(type).block_elems;
  switch (type) {
    case WeightType::f32:
      std::memcpy(dst, src, size_t(cols) * sizeof(float));
      return;
    case WeightType::f16:
      for (int64_t i = 0; i < cols; ++i) {
        uint16_t h;
        std::memcpy(&h, src + 2 * i, 2);
        dst[i] = fp16_to_f32(h);
      }
      return;
    case WeightType::bf16:
      for (int64_t i = 0; i < cols; ++i) {
        uint16_t h;
        std::memcpy(&h, src + 2 * i, 2);
        dst[i] = bf16_to_f32(h);
      }
      return;
    case WeightType::q8_0: return dequant_q8_0(blocks<BlockQ8_0>(src), nb, dst);
    case WeightType::q4_0: return dequant_q4_0(blocks<BlockQ4_0>(src), nb, dst);
    case WeightType::q4_k: return dequant_q4_k(blocks<BlockQ4_K>(src), nb, dst);
    case WeightType::q5_k: return dequant_q5_k(blocks<BlockQ5_K>(src), nb, dst);
    case WeightType::q6_k: return dequant_q6_k(blocks<BlockQ6_K>(src), nb, dst);
  }
}

}  // namespace conveyor::kernels
