// The weight encodings conveyor computes on, as ggml stores them in GGUF
// files, and plain scalar decoders for them.
//
// Each type stores a row of W in blocks of `block_elems` consecutive values
// taking `block_bytes` bytes (ggml's block_q8_0, block_q4_K, ...). The numbers
// of WeightType are ggml's type numbers, so a GGUF tensor type converts by a
// cast once checked with is_weight_type().
//
// The decoders here are the reference the fast kernels (quant_matmul.hpp) are
// tested against: one value at a time, exactly as ggml's dequantize_row_*.
#pragma once

#include <cstddef>
#include <cstdint>

namespace conveyor::kernels {

enum class WeightType : uint32_t {
  f32 = 0,
  f16 = 1,
  q4_0 = 2,
  q8_0 = 8,
  q4_k = 12,
  q5_k = 13,
  q6_k = 14,
  bf16 = 30,
};

// True for the ggml type numbers above.
bool is_weight_type(uint32_t ggml_type);
// "Q4_K", "F16", ...
const char* weight_type_name(WeightType type);

struct WeightTypeTraits {
  int32_t block_elems;  // values per block
  int32_t block_bytes;  // bytes per block
};
WeightTypeTraits weight_type_traits(WeightType type);

// Bytes of one row of `cols` values; cols must be a multiple of block_elems.
inline size_t row_bytes(WeightType type, int64_t cols) {
  const WeightTypeTraits t = weight_type_traits(type);
  return size_t(cols / t.block_elems) * size_t(t.block_bytes);
}

// IEEE half and bfloat16 to float (exact), and float to half rounded to
// nearest even (as F16C's vcvtps2ph).
float fp16_to_f32(uint16_t h);
uint16_t f32_to_fp16(float f);
inline float bf16_to_f32(uint16_t b) {
  const uint32_t bits = uint32_t(b) << 16;
  float f;
  __builtin_memcpy(&f, &bits, 4);
  return f;
}

// Decodes `cols` values (a multiple of the type's block_elems) of one row.
void dequantize_row(WeightType type,
                    const uint8_t* src,  // [row_bytes(type, cols)]
                    int64_t cols,
                    float* dst);  // [cols]

// The 6-bit scale and min of sub-block j (0..7) of a Q4_K or Q5_K block
// (ggml's get_scale_min_k4).
inline void k_quant_scale_min(int j, const uint8_t* scales, uint8_t* scale, uint8_t* min) {
  if (j < 4) {
    *scale = scales[j] & 63;
    *min = scales[j + 4] & 63;
  } else {
    *scale = uint8_t((scales[j + 4] & 0xF) | ((scales[j - 4] >> 6) << 4));
    *min = uint8_t((scales[j + 4] >> 4) | ((scales[j] >> 6) << 4));
  }
}

// Block layouts (little-endian, packed), for the code that reads them.
inline constexpr int32_t kQK = 256;  // values per K-quant super-block
struct BlockQ8_0 {
  uint16_t d;     // f16 scale
  int8_t qs[32];  // value = d * qs
};
struct BlockQ4_0 {
  uint16_t d;      // f16 scale
  uint8_t qs[16];  // value j: d * ((qs[j] & 15) - 8); value j + 16: d * ((qs[j] >> 4) - 8)
};
struct BlockQ4_K {
  uint16_t d, dmin;     // f16 super-block scales
  uint8_t scales[12];   // eight 6-bit scales and mins (k_quant_scale_min)
  uint8_t qs[kQK / 2];  // 4-bit quants, 64 values per 32 bytes (low nibbles first)
};
struct BlockQ5_K {
  uint16_t d, dmin;
  uint8_t scales[12];
  uint8_t qh[kQK / 8];  // the fifth bit: bit 2i / 2i+1 of qh[l] for sub-blocks 2i / 2i+1
  uint8_t qs[kQK / 2];
};
struct BlockQ6_K {
  uint8_t ql[kQK / 2];      // low 4 bits
  uint8_t qh[kQK / 4];      // high 2 bits
  int8_t scales[kQK / 16];  // one signed scale per 16 values
  uint16_t d;               // f16 super-block scale
};
static_assert(sizeof(BlockQ8_0) == 34 && sizeof(BlockQ4_0) == 18);
static_assert(sizeof(BlockQ4_K) == 144 && sizeof(BlockQ5_K) == 176 && sizeof(BlockQ6_K) == 210);

}  // namespace conveyor::kernels
