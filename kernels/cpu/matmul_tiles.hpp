// Internal to kernels/cpu: matmul_packed's tiles per instruction set
// (matmul_packed.inc), chosen at run time by matmul.cpp.
#pragma once

#include <cstdint>

namespace conveyor::kernels {

// What a product's tiles do with their result.
enum class Epilogue {
  store,       // y = x·Wᵀ
  accumulate,  // y += x·Wᵀ
  swiglu,      // panels (gate, up): y = silu(x·gateᵀ) · (x·upᵀ), 16 columns
};

// y = x·Wᵀ over `panels` packed panels of W, finished by `e`; m_out: the
// output columns that exist. One per instruction set: AVX-512, AVX2 with FMA,
// and the build's own flags (`base`).
#define CONVEYOR_RUN_PACKED_DECL                                                                  \
  void run_packed(Epilogue e, const float* x, int64_t ldx, int32_t n, const float* packed_w,     \
                  int32_t panels, int32_t k, float* y, int64_t ldy, int32_t m_out);
namespace avx512 { CONVEYOR_RUN_PACKED_DECL }
namespace avx2 { CONVEYOR_RUN_PACKED_DECL }
namespace base { CONVEYOR_RUN_PACKED_DECL }
#undef CONVEYOR_RUN_PACKED_DECL

}  // namespace conveyor::kernels
