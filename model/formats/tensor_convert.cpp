#include "model/formats/tensor_convert.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#if defined(__F16C__)
#include <immintrin.h>
#endif

namespace conveyor {

static_assert(std::endian::native == std::endian::little,
              "GGUF and llama2.c files are little-endian; conveyor reads them in place");

float half_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  if (exp == 0) {
    const float magnitude = float(mant) * 0x1p-24f;  // zero or subnormal
    return sign ? -magnitude : magnitude;
  }
  if (exp == 31) {  // infinity, or NaN made quiet (as F16C hardware does)
    return std::bit_cast<float>(sign | 0x7f800000u | (mant ? 0x400000u | (mant << 13) : 0u));
  }
  return std::bit_cast<float>(sign | ((exp + 112) << 23) | (mant << 13));
}

uint16_t float_to_half(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t exp = (x >> 23) & 0xffu;
  uint32_t mant = x & 0x7fffffu;
  if (exp == 0xff) return uint16_t(sign | 0x7c00u | (mant ? 0x200u | (mant >> 13) : 0u));
  const int32_t e = int32_t(exp) - 127 + 15;
  if (e >= 31) return uint16_t(sign | 0x7c00u);  // overflow: infinity
  if (e <= 0) {                                  // half subnormal or zero
    if (e < -10) return uint16_t(sign);
    mant |= 0x800000u;
    const uint32_t shift = uint32_t(14 - e);
    uint32_t h = mant >> shift;
    const uint32_t rest = mant & ((1u << shift) - 1);
    const uint32_t halfway = 1u << (shift - 1);
    if (rest > halfway || (rest == halfway && (h & 1u))) ++h;
    return uint16_t(sign | h);
  }
  uint32_t h = (uint32_t(e) << 10) | (mant >> 13);
  const uint32_t rest = mant & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;  // a carry may reach infinity
  return uint16_t(sign | h);
}

float bf16_to_float(uint16_t b) { return std::bit_cast<float>(uint32_t(b) << 16); }

uint16_t float_to_bf16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return uint16_t((x >> 16) | 64u);  // quiet NaN
  return uint16_t((x + (0x7fffu + ((x >> 16) & 1u))) >> 16);
}

size_t encoded_size(GgmlType type, size_t n) {
  switch (type) {
    case GgmlType::F32: return n * 4;
    case GgmlType::F16:
    case GgmlType::BF16: return n * 2;
    case GgmlType::Q8_0:
      return n % kQ8_0BlockSize == 0 ? n / kQ8_0BlockSize * kQ8_0BlockBytes : 0;
    default: return 0;
  }
}

namespace {

uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

void store_u16(uint8_t* p, uint16_t v) { std::memcpy(p, &v, 2); }

void decode_q8_0(const uint8_t* src, float* dst, size_t n) {
  for (size_t b = 0; b < n / kQ8_0BlockSize; ++b) {
    const uint8_t* block = src + b * kQ8_0BlockBytes;
    const float d = half_to_float(load_u16(block));
    for (size_t j = 0; j < kQ8_0BlockSize; ++j)
      dst[b * kQ8_0BlockSize + j] = d * float(int8_t(block[2 + j]));
  }
}

// ggml's quantize_row_q8_0_ref: d = max|x| / 127, q = round(x / d).
void encode_q8_0(const float* src, uint8_t* dst, size_t n) {
  for (size_t b = 0; b < n / kQ8_0BlockSize; ++b) {
    const float* x = src + b * kQ8_0BlockSize;
    uint8_t* block = dst + b * kQ8_0BlockBytes;
    float amax = 0.0f;
    for (size_t j = 0; j < kQ8_0BlockSize; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    store_u16(block, float_to_half(d));
    for (size_t j = 0; j < kQ8_0BlockSize; ++j) {
      const float q = std::round(x[j] * id);  // |q| <= 127 unless x is not finite
      block[2 + j] = uint8_t(int8_t(std::isfinite(q) ? std::clamp(q, -127.0f, 127.0f) : 0.0f));
    }
  }
}

}  // namespace

bool decode_to_f32(GgmlType type, std::span<const uint8_t> src, std::span<float> dst) {
  if (!is_convertible_type(type)) return false;
  const size_t n = dst.size();
  if (encoded_size(type, n) != src.size() || (n > 0 && src.empty())) return false;
  switch (type) {
    case GgmlType::F32:
      if (n > 0) std::memcpy(dst.data(), src.data(), n * 4);
      return true;
    case GgmlType::F16: {
      size_t i = 0;
#if defined(__F16C__)
      // Every half is exactly representable as a float, so the hardware
      // conversion gives the same bits as half_to_float.
      for (; i + 8 <= n; i += 8) {
        const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src.data() + 2 * i));
        _mm256_storeu_ps(dst.data() + i, _mm256_cvtph_ps(h));
      }
#endif
      for (; i < n; ++i) dst[i] = half_to_float(load_u16(src.data() + 2 * i));
      return true;
    }
    case GgmlType::BF16:
      for (size_t i = 0; i < n; ++i) dst[i] = bf16_to_float(load_u16(src.data() + 2 * i));
      return true;
    case GgmlType::Q8_0:
      decode_q8_0(src.data(), dst.data(), n);
      return true;
    default:
      return false;
  }
}

bool encode_from_f32(GgmlType type, std::span<const float> src, std::span<uint8_t> dst) {
  if (!is_convertible_type(type)) return false;
  const size_t n = src.size();
  if (encoded_size(type, n) != dst.size() || (n > 0 && dst.empty())) return false;
  switch (type) {
    case GgmlType::F32:
      if (n > 0) std::memcpy(dst.data(), src.data(), n * 4);
      return true;
    case GgmlType::F16:
      for (size_t i = 0; i < n; ++i) store_u16(dst.data() + 2 * i, float_to_half(src[i]));
      return true;
    case GgmlType::BF16:
      for (size_t i = 0; i < n; ++i) store_u16(dst.data() + 2 * i, float_to_bf16(src[i]));
      return true;
    case GgmlType::Q8_0:
      encode_q8_0(src.data(), dst.data(), n);
      return true;
    default:
      return false;
  }
}

}  // namespace conveyor
