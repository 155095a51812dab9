// Conversions between float32 and the tensor encodings conveyor reads and
// writes, as ggml defines them: F16 (IEEE half), BF16 (bfloat16), Q8_0 (blocks
// of 32 values: an F16 scale d followed by 32 int8 q; value = d * q), Q4_0 and
// the K-quants Q4_K, Q5_K, Q6_K (blocks of 256; layouts in
// kernels/cpu/quant_formats.hpp). Decoding is the kernels' dequantize_row;
// encoding is quantize.hpp, which follows ggml's reference quantizers, and all
// rounding is round-to-nearest-even as in ggml, so a file written by
// llama.cpp's converter or llama-quantize and one written here agree bit for bit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "model/formats/gguf_types.hpp"

namespace conveyor {

float half_to_float(uint16_t h);
uint16_t float_to_half(float f);
float bf16_to_float(uint16_t b);
uint16_t float_to_bf16(float f);

inline constexpr size_t kQ8_0BlockSize = 32;   // values per Q8_0 block
inline constexpr size_t kQ8_0BlockBytes = 34;  // 2-byte F16 scale + 32 int8

// Bytes that `n` values take when stored as `type` (a convertible type, see
// is_convertible_type); 0 when it is not one or n is not a multiple of its
// block size.
size_t encoded_size(GgmlType type, size_t n);

// Decodes `src`, which holds dst.size() values of `type`, into dst. Returns
// false, writing nothing, when the type is not convertible (see
// is_convertible_type) or src.size() != encoded_size(type, dst.size()).
bool decode_to_f32(GgmlType type, std::span<const uint8_t> src, std::span<float> dst);

// Encodes src as `type` into dst. Returns false, writing nothing, when the type
// is not convertible or dst.size() != encoded_size(type, src.size()).
bool encode_from_f32(GgmlType type, std::span<const float> src, std::span<uint8_t> dst);

}  // namespace conveyor
