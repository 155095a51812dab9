// Weight matrices decoded and rounded to bf16 for a device's products (the
// CUDA runner uploads these; cuBLAS multiplies them in bf16 with float32
// accumulation). Any stored type works: float32, F16, BF16 and the quantized
// GGUF encodings are decoded row by row (WeightMatrix::decode_row), then
// rounded to nearest even (kernels/cpu/kv_dtype.hpp's f32_to_bf16). Plain
// host code, so it is tested on every machine.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <vector>

#include "model/weights.hpp"

namespace conveyor {

// The rows of `parts` (each [rows_i, cols]), one after another, as bf16:
// [sum of rows_i, cols]. The parts' row counts come from their element counts.
std::vector<uint16_t> pack_bf16(std::initializer_list<const WeightMatrix*> parts, int64_t cols);

}  // namespace conveyor
