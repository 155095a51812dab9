// Encoders from float32 to ggml's block formats: Q8_0, Q4_0 and the K-quants
// Q4_K, Q5_K, Q6_K (layouts in kernels/cpu/quant_formats.hpp, whose
// dequantize_row decodes them).
//
// Each follows ggml's reference quantizer (quantize_row_*_ref in
// ggml/src/ggml-quants.c) step for step: the same search for scales, the
// same float operations in the same order, ggml's nearest_int rounding and
// F16 rounding to nearest even. So a matrix encoded here has the bytes that
// llama.cpp's llama-quantize writes for it when given no importance matrix:
// checked against llama.cpp c392e50's llama_model_quantize on float32 files
// of dummy:llama-110m, dummy:llama-15m and the tiny-llama2 weights, where
// `conveyor convert` wrote every tensor with llama.cpp's type and bytes in
// q4_0, q4_k_m, q5_k_m, q6_k and q8_0 (except the rows of 288 that llama.cpp
// stores as Q5_0/Q5_1, see gguf_matrix_type).
// Any value is accepted; non-finite input gives blocks without meaning (as in
// ggml) but never undefined behaviour.
#pragma once

#include <cstddef>
#include <cstdint>

namespace conveyor {

inline constexpr size_t kQ4_0BlockSize = 32;    // values per Q4_0 block (18 bytes)
inline constexpr size_t kKQuantBlockSize = 256;  // values per Q4_K/Q5_K/Q6_K super-block

// Each encodes `n` values of src, a multiple of the type's block size, into
// dst, which holds n / block size blocks.
void quantize_q8_0(const float* src, uint8_t* dst, size_t n);  // ggml's quantize_row_q8_0_ref
void quantize_q4_0(const float* src, uint8_t* dst, size_t n);  // quantize_row_q4_0_ref
void quantize_q4_k(const float* src, uint8_t* dst, size_t n);  // quantize_row_q4_K_ref
void quantize_q5_k(const float* src, uint8_t* dst, size_t n);  // quantize_row_q5_K_ref
void quantize_q6_k(const float* src, uint8_t* dst, size_t n);  // quantize_row_q6_K_ref

}  // namespace conveyor
