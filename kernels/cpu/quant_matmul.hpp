// Matrix products y = x·Wᵀ on weights kept in their file's encoding:
// Q8_0, Q4_0, Q4_K, Q5_K, Q6_K (integer quants) and F16, BF16 (half floats).
//
// Like matmul_packed (matmul.hpp), W is repacked once at load into panels of
// 16 rows so that a product streams W exactly once and a tile of x rows
// reuses each panel from cache. The repacking keeps the file's bits:
//
//  - Q8_0 and Q4_0 become, per (panel, block of 32 k values), 16 f16 scales,
//    then the 16 rows' unsigned quants interleaved 4 k values at a time (the
//    operand shape of VNNI's vpdpbusd), 8 bits (Q8_0, stored + 128) or 4
//    bits (Q4_0) each: value = scale · (q − zero).
//  - The K-quants (Q4_K, Q5_K, Q6_K) become, per (panel, super-block of 256),
//    a header of each row's f16 d and dmin and its blocks' integer scales and
//    mins as bytes, then the blocks' quants interleaved the same way, as 4-bit
//    nibbles followed by their fifth (Q5_K) or fifth and sixth (Q6_K) bits:
//    value = d · sc · (q − zero) − dmin · min, ggml's own numbers.
//  - x is quantized per block (per super-block for the K-quants) to int8 with
//    a float scale (as llama.cpp does),
//    the block dot products run on int8 (vpdpbusd with AVX512-VNNI,
//    vpmaddubsw on AVX2), and each block's integer sum is scaled in float.
//  - F16 and BF16 keep matmul_packed's layout [m/16][k][16] in 16-bit values,
//    widened to float in registers.
//
// The instruction set is chosen at run time: AMX tiles for the integer types
// (AMX-INT8) at batches of 8 rows and more (the AVX-512 kernels for fewer,
// with the same bits) and for BF16 (AMX-BF16, x rounded to bf16) at every
// batch size, where the CPU has them and Linux grants their use; else AVX-512 (F, BW,
// VL, VNNI) where the CPU has it; else AVX2 with FMA and F16C. All are
// compiled into every build (quant_kernels_*.cpp), so one binary runs on
// each machine.
// Multi-threaded with OpenMP like matmul_packed; scratch is the caller's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/cpu/quant_formats.hpp"

namespace conveyor::kernels {

// avxvnni: AVX2 with AVX-VNNI's 256-bit vpdpbusd (CPUs with it and no
// AVX-512: Intel's client cores since Alder Lake, its E-core servers); amx:
// AVX-512 VNNI, with AMX tiles for the batches of the integer types and BF16.
// Everything else in the kernels (attention, float products) runs its AVX2
// code under avx2 and avxvnni alike, and its AVX-512 code under avx512 and amx.
enum class Isa : uint8_t { avx2, avxvnni, avx512, amx };

// True when this CPU runs the products at all: AVX2 with FMA and F16C (x86-64-v3).
bool quant_kernels_supported();
// The best instruction set this CPU runs (avx2 also when quant_kernels_supported is false).
Isa detected_isa();
// Whether this CPU runs `isa` (a CPU with AVX-512 VNNI may lack AVX-VNNI, as
// Ice Lake does; amx only where detected: forcing it elsewhere emulates it).
bool isa_supported(Isa isa);
// avx512 and amx: the kernels that are not quantized products take their
// AVX-512 code.
bool isa_has_avx512(Isa isa);
// The one the kernels use: detected_isa() unless forced (tests compare them all).
Isa active_isa();
// Forcing amx on a CPU with AVX-512 VNNI but no usable AMX runs the tile
// kernels on an emulated tile unit (plain C++, slow): for tests of everything
// in them but the instructions themselves.
void force_isa(Isa isa);
// True while forced amx runs on the emulated tile unit.
bool amx_emulated();
// Under amx, products on this many x rows and more run on the tiles.
int32_t amx_min_rows();
const char* isa_name(Isa isa);

// True for the types these products run on (all WeightTypes but F32, which
// keeps matmul_packed).
bool is_quant_matmul_type(WeightType type);
// W [m, k] of `type` needs k to be a multiple of this (32, or 256 for K-quants).
int32_t quant_k_multiple(WeightType type);

// Bytes that pack_weights writes for W [m, k] of `type`.
size_t packed_weight_bytes(WeightType type, int32_t m, int32_t k);

// Repacks W, rows of ggml blocks back to back, into panels.
void pack_weights(WeightType type,
                  const uint8_t* w,  // [m][row_bytes(type, k)]
                  int32_t m, int32_t k,
                  uint8_t* packed);  // [packed_weight_bytes(type, m, k)]

// The same for the feed-forward gate and up matrices, panels alternating
// (16 gate rows, the same 16 up rows), for matmul_weights_swiglu.
size_t packed_gate_up_bytes(WeightType type, int32_t hidden, int32_t k);
void pack_gate_up_weights(WeightType type, const uint8_t* gate, const uint8_t* up,
                          int32_t hidden, int32_t k, uint8_t* packed);

// Row `row` of the original W, decoded to float, from its packed form (the
// embedding lookup of a tied classifier).
void unpack_weight_row(WeightType type, const uint8_t* packed, int32_t k, int32_t row,
                       float* out);  // [k]

// Scratch for the products: x quantized per block. Grown on demand, reused.
struct QuantScratch {
  std::vector<int8_t> xq;  // [n, k]
  std::vector<float> xd;   // [n, k / block]: scale of each block (or super-block)
  std::vector<float> xs;   // [n, k / block]: −zero · scale · sum of each block's quants (Q8_0, Q4_0)
  std::vector<int8_t> xm;  // [n, k / 256, 2 · blocks]: Q4_K, Q5_K: each block's sum of quants, split
  std::vector<uint16_t> xh;  // [n, k]: x in bf16 (BF16 weights on AMX tiles)
};

// y = x·Wᵀ (accumulate: y += x·Wᵀ) with W packed by pack_weights.
void matmul_weights(WeightType type,
                    const float* x,  // [n, ldx], first k columns used
                    int64_t ldx, int32_t n,
                    const uint8_t* packed_w, int32_t m, int32_t k,
                    float* y,  // [n, ldy], first m columns written
                    int64_t ldy, bool accumulate, QuantScratch& scratch);

// y = silu(x·gateᵀ) · (x·upᵀ) with gate and up packed by pack_gate_up_weights.
void matmul_weights_swiglu(WeightType type,
                           const float* x,  // [n, ldx]
                           int64_t ldx, int32_t n,
                           const uint8_t* packed_gate_up, int32_t hidden, int32_t k,
                           float* y,  // [n, ldy], first hidden columns written
                           int64_t ldy, QuantScratch& scratch);

}  // namespace conveyor::kernels
