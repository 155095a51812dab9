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
  bool offsets = false;     // per-row offsets dmin · min (Q4_K, Q5_K; with super only)
  float zero = 0;           // without offsets: value = scale · (q − zero)
  bool full_range = false;  // quants use all 8 bits (Q8_0): AVX2 needs a signed trick
  size_t quant_bytes = 0;   // quants of one (panel, block): 16 · block · (bits + planes) / 8
  size_t block_bytes = 0;   // scales and quants of one (panel, block); 0 with super
  // Q4_K and Q5_K: k values a super-block (256), whose blocks share one header
  // [block scales f16 [8][16] | dmin f16 [16] | mins u8 [2][16][4]] and follow
  // it as quants only; offset = dmin · min. x is quantized per super-block.
  int32_t super = 0;
  size_t super_bytes = 0;   // header and quants of one (panel, super-block)
  size_t panel_bytes = 0;   // one panel for the k it was made for
};

// Bytes of a super-block's header (PanelFormat::super) for `blocks` blocks.
inline constexpr size_t super_header_bytes(int32_t blocks) {
  return size_t(kQuantPanelRows) * (2 * blocks + 2 + blocks);
}

}  // namespace conveyor::kernels

namespace conveyor::kernels {

enum class WeightType : uint32_t;
// The layout for W [*, k] of `type` (a quant_matmul type).
PanelFormat panel_format(WeightType type, int32_t k);

}  // namespace conveyor::kernels
