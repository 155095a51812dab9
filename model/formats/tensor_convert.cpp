#include "model/formats/tensor_convert.hpp"

#include <algorithm>
#include <bit>
#include <cstring>

#include "kernels/cpu/quant_formats.hpp"
#include "model/formats/quantize.hpp"

namespace conveyor {

static_assert(std::endian::native == std::endian::little,
              "GGUF and llama2.c files are little-endian; conveyor reads them in place");

float half_to_float(uint16_t h) { return kernels::fp16_to_f32(h); }

uint16_t float_to_half(float f) { return kernels::f32_to_fp16(f); }

float bf16_to_float(uint16_t b) { return kernels::bf16_to_f32(b); }

uint16_t float_to_bf16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return uint16_t((x >> 16) | 64u);  // quiet NaN
  return uint16_t((x + (0x7fffu + ((x >> 16) & 1u))) >> 16);
}

namespace {

void store_u16(uint8_t* p, uint16_t v) { std::memcpy(p, &v, 2); }

}  // namespace

size_t encoded_size(GgmlType type, size_t n) {
  if (!is_convertible_type(type)) return 0;
  const GgmlTypeTraits t = ggml_type_traits(uint32_t(type));
  return n % t.block_size == 0 ? n / t.block_size * t.type_size : 0;
}

bool decode_to_f32(GgmlType type, std::span<const uint8_t> src, std::span<float> dst) {
  if (!is_convertible_type(type)) return false;
  const size_t n = dst.size();
  if (encoded_size(type, n) != src.size() || n == 0) return n == 0 && src.empty();
  // The one decoder per type, shared with the kernels' tests; the numbers of
  // the convertible GgmlTypes are those of WeightType.
  kernels::dequantize_row(kernels::WeightType(uint32_t(type)), src.data(), int64_t(n), dst.data());
  return true;
}

bool encode_from_f32(GgmlType type, std::span<const float> src, std::span<uint8_t> dst) {
  if (!is_convertible_type(type)) return false;
  const size_t n = src.size();
  if (encoded_size(type, n) != dst.size() || n == 0) return n == 0 && dst.empty();
  void (*quantize)(const float*, uint8_t*, size_t) = nullptr;
  switch (type) {
    case GgmlType::F32:
      std::memcpy(dst.data(), src.data(), n * 4);
      return true;
    case GgmlType::F16:
      for (size_t i = 0; i < n; ++i) store_u16(dst.data() + 2 * i, float_to_half(src[i]));
      return true;
    case GgmlType::BF16:
      for (size_t i = 0; i < n; ++i) store_u16(dst.data() + 2 * i, float_to_bf16(src[i]));
      return true;
    case GgmlType::Q8_0: quantize = quantize_q8_0; break;
    case GgmlType::Q4_0: quantize = quantize_q4_0; break;
    case GgmlType::Q4_K: quantize = quantize_q4_k; break;
    case GgmlType::Q5_K: quantize = quantize_q5_k; break;
    case GgmlType::Q6_K: quantize = quantize_q6_k; break;
    default: return false;
  }
  // Each block is quantized on its own, so chunks of whole blocks on
  // OpenMP's threads write the same bytes as one pass (a 0.8B model's
  // K-quants took 2.5 minutes on one core).
  const GgmlTypeTraits t = ggml_type_traits(uint32_t(type));
  const size_t blocks = n / t.block_size, chunk_blocks = 256;
  const auto chunks = static_cast<int64_t>((blocks + chunk_blocks - 1) / chunk_blocks);
#pragma omp parallel for schedule(dynamic) if (chunks > 1)
  for (int64_t c = 0; c < chunks; ++c) {
    const size_t first = size_t(c) * chunk_blocks, count = std::min(chunk_blocks, blocks - first);
    quantize(src.data() + first * t.block_size, dst.data() + first * t.type_size, count * t.block_size);
  }
  return true;
}

}  // namespace conveyor
