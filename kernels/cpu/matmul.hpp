// Matrix products y = x·Wᵀ for the linear layers (W [m, k] row-major, as in
// model/weights.hpp).
//
// Two paths:
//  - matmul_packed: W repacked once into 16-row panels ([m/16][k][16]) so the
//    product streams W exactly once with no per-call packing. This is what the
//    forward pass uses: at decode batch sizes (n <= 64) a BLAS spends most of
//    its time packing W on every call (kernels/cpu/README.md has the numbers).
//  - matmul_blas (matmul_blas.hpp, its own library so that the serving
//    binary does not load a BLAS): the same product through OpenBLAS, on the
//    unpacked W. For comparisons and tests.
//
// Both are multi-threaded with OpenMP (the calling thread's team size) and
// allocate nothing.
#pragma once

#include <cstddef>
#include <cstdint>

namespace conveyor::kernels {

// Rows of W per packed panel: one 512-bit vector of floats.
inline constexpr int32_t kPanelRows = 16;

// Floats that pack_matrix writes for W [m, k]: m rounded up to whole panels.
inline size_t packed_matrix_floats(int32_t m, int32_t k) {
  return size_t((m + kPanelRows - 1) / kPanelRows) * kPanelRows * size_t(k);
}

// Repacks W into panels: packed[p][c][r] = W[p * 16 + r][c], zero-padded past m.
void pack_matrix(const float* w,  // [m, k]
                 int32_t m, int32_t k,
                 float* packed);  // [ceil(m / 16)][k][16]

// Copies row `row` of the original W out of its packed form.
void unpack_row(const float* packed,  // [ceil(m / 16)][k][16]
                int32_t k, int32_t row,
                float* out);  // [k]

// y = x·Wᵀ (accumulate: y += x·Wᵀ) with W packed by pack_matrix.
void matmul_packed(const float* x,  // [n, ldx], first k columns used
                   int64_t ldx, int32_t n,
                   const float* packed_w,  // [ceil(m / 16)][k][16]
                   int32_t m, int32_t k,
                   float* y,  // [n, ldy], first m columns written
                   int64_t ldy, bool accumulate = false);

// The feed-forward gate and up matrices packed so that one product yields
// silu(x·gateᵀ) · (x·upᵀ) (SwiGLU) with no [n, 2·hidden] intermediate: panels
// alternate between 16 gate rows and the same 16 up rows.
inline size_t packed_gate_up_floats(int32_t hidden, int32_t k) {
  return 2 * packed_matrix_floats(hidden, k);
}
void pack_gate_up(const float* gate,  // [hidden, k]
                  const float* up,    // [hidden, k]
                  int32_t hidden, int32_t k,
                  float* packed);  // [2 ceil(hidden / 16)][k][16]

// y = silu(x·gateᵀ) · (x·upᵀ), elementwise, with gate and up packed by pack_gate_up.
void matmul_packed_swiglu(const float* x,  // [n, ldx]
                          int64_t ldx, int32_t n,
                          const float* packed_gate_up,  // [2 ceil(hidden / 16)][k][16]
                          int32_t hidden, int32_t k,
                          float* y,  // [n, ldy], first hidden columns written
                          int64_t ldy);

}  // namespace conveyor::kernels
