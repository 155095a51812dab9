#include "kernels/cpu/matmul.hpp"

#include <omp.h>

#include <algorithm>

#include "kernels/cpu/matmul_tiles.hpp"
#include "kernels/cpu/quant_matmul.hpp"

// The tiles with the build's own flags, for CPUs without AVX2 and FMA.
#define CONVEYOR_ISA_NS base
#if defined(__AVX512F__)
#define CONVEYOR_TILE_ROWS 12
#define CONVEYOR_VEC_LANES 16
#elif defined(__AVX__)
#define CONVEYOR_TILE_ROWS 3
#define CONVEYOR_VEC_LANES 8
#else
#define CONVEYOR_TILE_ROWS 1
#define CONVEYOR_VEC_LANES 4
#endif
#include "kernels/cpu/matmul_packed.inc"

namespace conveyor::kernels {

namespace {

// The tiles for the instruction set the kernels use (active_isa(): forced
// in tests and benchmarks).
void run_packed(Epilogue e, const float* x, int64_t ldx, int32_t n, const float* packed_w,
                int32_t panels, int32_t k, float* y, int64_t ldy, int32_t m_out) {
  if (!quant_kernels_supported()) return base::run_packed(e, x, ldx, n, packed_w, panels, k, y, ldy, m_out);
  if (!isa_has_avx512(active_isa())) return avx2::run_packed(e, x, ldx, n, packed_w, panels, k, y, ldy, m_out);
  avx512::run_packed(e, x, ldx, n, packed_w, panels, k, y, ldy, m_out);
}

}  // namespace

void pack_matrix(const float* w, int32_t m, int32_t k, float* packed) {
  const int32_t panels = (m + kPanelRows - 1) / kPanelRows;
#pragma omp parallel for schedule(static) if (size_t(m) * k > (size_t(1) << 16))
  for (int32_t p = 0; p < panels; ++p) {
    float* out = packed + size_t(p) * k * kPanelRows;
    for (int32_t r = 0; r < kPanelRows; ++r) {
      const int32_t row = p * kPanelRows + r;
      const float* in = row < m ? w + size_t(row) * k : nullptr;
      for (int32_t c = 0; c < k; ++c) out[size_t(c) * kPanelRows + r] = in ? in[c] : 0.0f;
    }
  }
}

void unpack_row(const float* packed, int32_t k, int32_t row, float* out) {
  const float* panel = packed + size_t(row / kPanelRows) * k * kPanelRows + row % kPanelRows;
  for (int32_t c = 0; c < k; ++c) out[c] = panel[size_t(c) * kPanelRows];
}

void matmul_packed(const float* x, int64_t ldx, int32_t n, const float* packed_w, int32_t m,
                   int32_t k, float* y, int64_t ldy, bool accumulate) {
  if (n <= 0 || m <= 0) return;
  const int32_t panels = (m + kPanelRows - 1) / kPanelRows;
  if (accumulate)
    run_packed(Epilogue::accumulate, x, ldx, n, packed_w, panels, k, y, ldy, m);
  else
    run_packed(Epilogue::store, x, ldx, n, packed_w, panels, k, y, ldy, m);
}

void pack_gate_up(const float* gate, const float* up, int32_t hidden, int32_t k, float* packed) {
  const int32_t chunks = (hidden + kPanelRows - 1) / kPanelRows;
  const size_t panel = size_t(k) * kPanelRows;
#pragma omp parallel for schedule(static) if (size_t(hidden) * k > (size_t(1) << 16))
  for (int32_t i = 0; i < chunks; ++i) {
    const int32_t rows = std::min(kPanelRows, hidden - i * kPanelRows);
    // Each chunk packs as a small matrix of `rows` rows, zero-padded to 16.
    pack_matrix(gate + size_t(i) * kPanelRows * k, rows, k, packed + 2 * i * panel);
    pack_matrix(up + size_t(i) * kPanelRows * k, rows, k, packed + (2 * i + 1) * panel);
  }
}

void matmul_packed_swiglu(const float* x, int64_t ldx, int32_t n, const float* packed_gate_up,
                          int32_t hidden, int32_t k, float* y, int64_t ldy) {
  if (n <= 0 || hidden <= 0) return;
  const int32_t panels = 2 * ((hidden + kPanelRows - 1) / kPanelRows);
  run_packed(Epilogue::swiglu, x, ldx, n, packed_gate_up, panels, k, y, ldy, hidden);
}

}  // namespace conveyor::kernels
