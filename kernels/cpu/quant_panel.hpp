// Internal to kernels/cpu: the packed-panel layout of quant_matmul.hpp, shared
// by the packing code and the per-instruction-set kernels.
//
// A plain struct with no functions: the kernels are compiled once per
// instruction set (quant_kernels.inc), and an inline function shared between
// those translation units could be linked in its AVX-512 version.
#pragma once

#include <cstddef>
#include <cstdint>

namespace conveyor::kernels {

inline constexpr int32_t kQuantPanelRows = 16;
// Under Isa::amx, products on this many x rows and more run on the tiles.
inline constexpr int32_t kAmxMinRows = 8;

struct PanelFormat {
  bool half = false;        // F16/BF16: [m/16][k][16] 16-bit values
  bool bf16 = false;        // which half type
  int32_t block = 0;        // k values per block (32, or 16 for Q6_K)
  int32_t bits = 0;         // 8: one byte per quant; 4: a nibble, plus `planes` high bits
  int32_t planes = 0;       // with bits 4: high bits a value (Q5_K 1, Q6_K 2), after the nibbles
  float zero = 0;           // value = scale · (q − zero) (− dmin · min with super-blocks)
  bool full_range = false;  // quants use all 8 bits (Q8_0): AVX2 needs a signed trick
  size_t quant_bytes = 0;   // quants of one (panel, block): 16 · block · (bits + planes) / 8
  size_t block_bytes = 0;   // 16 f16 scales and the quants of one (panel, block); 0 with super
  // K-quants (Q4_K, Q5_K, Q6_K): k values a super-block (256), whose blocks
  // share one header (SuperHeader) and follow it as quants only, and whose
  // block scales are integers times the super-block's d, as in ggml. x is
  // quantized per super-block.
  int32_t super = 0;
  // Q6_K: value = d · sc · (q − 32), sc signed and no mins. The kernels
  // multiply the centred q − 32 (signed) by x's quants + 128 (unsigned) and
  // take 128 · Σ sc · Σ (q − 32), a constant of each row, out once.
  bool centered = false;
  size_t super_bytes = 0;      // header and quants of one (panel, super-block)
  size_t panel_bytes = 0;      // one panel for the k it was made for
};

// Where a super-block's header keeps its parts, in bytes from its start, for
// `blocks` blocks: per panel row (lane) d and dmin (f16 [16] each), each
// block's scale as a byte [blocks][16], and each block's min as a byte
// [blocks / 4][16][4] (four blocks a 32-bit lane, the vpdpbusd operand), for
// value = d · scale · (q − zero) − dmin · min. Centred formats (Q6_K) have
// signed scales and no dmin and mins, but the row's constant 128 · Σ scale ·
// Σ (q − 32) as int32 [16] (PanelFormat::centered). The header is padded to
// whole cache lines, so that the quants after it are aligned.
struct SuperHeader {
  size_t dmin, scales, mins, consts, bytes;
};
inline constexpr SuperHeader super_header(int32_t blocks, bool centered) {
  const size_t halves = size_t(kQuantPanelRows) * 2, lanes = size_t(blocks) * kQuantPanelRows;
  auto lines = [](size_t bytes) { return (bytes + 63) / 64 * 64; };
  if (centered) return {0, halves, 0, halves + lanes, lines(halves + lanes + 4 * kQuantPanelRows)};
  return {halves, 2 * halves, 2 * halves + lanes, 0, lines(2 * halves + 2 * lanes)};
}

}  // namespace conveyor::kernels

namespace conveyor::kernels {

enum class WeightType : uint32_t;
// The layout for W [*, k] of `type` (a quant_matmul type).
PanelFormat panel_format(WeightType type, int32_t k);

}  // namespace conveyor::kernels
