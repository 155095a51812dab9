#include "kernels/cpu/matmul.hpp"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <array>
#include <utility>

#include "kernels/cpu/simd.hpp"

namespace conveyor::kernels {

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

namespace {

// The largest x-row tile: NR rows × 2 panels = 2·NR accumulators, which with
// the two W vectors and a broadcast must fit in the 32 vector registers.
constexpr int kMaxTileRows = 12;

// What a micro kernel does with its result.
enum class Epilogue {
  store,       // y = x·Wᵀ
  accumulate,  // y += x·Wᵀ
  swiglu,      // panels (gate, up): y = silu(x·gateᵀ) · (x·upᵀ), 16 columns
};

// y[0..NR)[0..16·NP) = x[0..NR)·(panels p, p+1)ᵀ, finished by epilogue E.
// `valid` is how many of the output columns exist in y (the last panel may be
// padding).
//
// While it computes, the kernel prefetches `prefetch_step` floats per k step
// from `prefetch` (the part of the next panel pair that this tile is to pull
// into cache), so that W streams from memory under the arithmetic instead of
// stalling the first tile of every pair.
template <int NR, int NP, Epilogue E>
void micro_kernel(const float* x, int64_t ldx, const float* p, int32_t k, float* y, int64_t ldy,
                  int valid, const float* prefetch, int32_t prefetch_step) {
  using simd::f32x16;
  f32x16 c[NR][NP];
  for (int r = 0; r < NR; ++r)
    for (int j = 0; j < NP; ++j) c[r][j] = f32x16{};
  const float* p1 = p + size_t(k) * kPanelRows;
  for (int32_t kk = 0; kk < k; ++kk) {
    // Two prefetches a step cover up to two cache lines (32 floats) a step.
    __builtin_prefetch(prefetch + size_t(kk) * prefetch_step);
    __builtin_prefetch(prefetch + size_t(kk) * prefetch_step + prefetch_step / 2);
    f32x16 w[NP];
    w[0] = simd::load(p + size_t(kk) * kPanelRows);
    if constexpr (NP == 2) w[1] = simd::load(p1 + size_t(kk) * kPanelRows);
    for (int r = 0; r < NR; ++r) {
      const float xv = x[r * ldx + kk];
      for (int j = 0; j < NP; ++j) c[r][j] += w[j] * xv;
    }
  }
  constexpr int kOut = E == Epilogue::swiglu ? kPanelRows : NP * kPanelRows;
  f32x16 result[NR][kOut / kPanelRows];
  for (int r = 0; r < NR; ++r) {
    if constexpr (E == Epilogue::swiglu) {
      static_assert(NP == 2);
      const f32x16 gate = c[r][0];
      result[r][0] = gate / (1.0f + simd::exp_fast(-gate)) * c[r][1];
    } else {
      for (int j = 0; j < NP; ++j) result[r][j] = c[r][j];
    }
  }
  constexpr bool add = E == Epilogue::accumulate;
  if (valid == kOut) {
    for (int r = 0; r < NR; ++r)
      for (int j = 0; j < kOut / kPanelRows; ++j) {
        float* out = y + r * ldy + j * kPanelRows;
        simd::store(out, add ? simd::load(out) + result[r][j] : result[r][j]);
      }
    return;
  }
  for (int r = 0; r < NR; ++r) {
    float tmp[kOut];
    for (int j = 0; j < kOut / kPanelRows; ++j) simd::store(tmp + j * kPanelRows, result[r][j]);
    float* out = y + r * ldy;
    for (int i = 0; i < valid; ++i) out[i] = add ? out[i] + tmp[i] : tmp[i];
  }
}

using MicroKernel = void (*)(const float*, int64_t, const float*, int32_t, float*, int64_t, int,
                             const float*, int32_t);

template <int NP, Epilogue E, int... NRs>
constexpr auto make_table(std::integer_sequence<int, NRs...>) {
  return std::array<MicroKernel, sizeof...(NRs)>{&micro_kernel<NRs + 1, NP, E>...};
}

template <Epilogue E>
MicroKernel pick_kernel(int rows, int panels) {
  using Rows = std::make_integer_sequence<int, kMaxTileRows>;
  if constexpr (E == Epilogue::swiglu) {
    static constexpr auto two = make_table<2, E>(Rows{});
    return two[rows - 1];
  } else {
    static constexpr auto one = make_table<1, E>(Rows{});
    static constexpr auto two = make_table<2, E>(Rows{});
    return panels == 2 ? two[rows - 1] : one[rows - 1];
  }
}

// The product over `panels` packed panels, split into (panel pair, row tile)
// items. out_cols: the output columns a pair writes (32, or 16 for swiglu);
// m_out: the output columns that exist.
template <Epilogue E>
void run_packed(const float* x, int64_t ldx, int32_t n, const float* packed_w, int32_t panels,
                int32_t k, float* y, int64_t ldy, int32_t m_out) {
  constexpr int32_t kPairCols = E == Epilogue::swiglu ? kPanelRows : 2 * kPanelRows;
  const int32_t pairs = (panels + 1) / 2;
  // Split the rows into near-equal tiles of at most kMaxTileRows.
  const int32_t tiles = (n + kMaxTileRows - 1) / kMaxTileRows;
  const int32_t items = pairs * tiles;
  const double flops = 2.0 * n * panels * kPanelRows * k;
  // Items run pair-major, so a thread keeps one W panel pair hot in cache
  // while it walks the row tiles, and reads its share of W once.
#pragma omp parallel if (flops > 2e5 && items > 1)
  {
    const int nt = omp_get_num_threads(), t = omp_get_thread_num();
    const int32_t begin = int32_t(int64_t(items) * t / nt);
    const int32_t end = int32_t(int64_t(items) * (t + 1) / nt);
    for (int32_t it = begin; it < end; ++it) {
      const int32_t pair = it / tiles, tile = it % tiles;
      const int32_t r0 = int32_t(int64_t(n) * tile / tiles);
      const int32_t r1 = int32_t(int64_t(n) * (tile + 1) / tiles);
      const int32_t p = pair * 2, np = std::min(2, panels - p);
      const int32_t col = pair * kPairCols;
      const int valid = std::min(E == Epilogue::swiglu ? kPairCols : np * kPanelRows, m_out - col);
      const float* panel = packed_w + size_t(p) * k * kPanelRows;
      // The tiles of this pair share the prefetch of the next pair (the
      // panels are contiguous, so it starts where this pair ends); the last
      // pair of the thread's range prefetches its own, cached, lines. With a
      // single tile W is one sequential stream, which the hardware prefetcher
      // follows better alone (26 -> 43 GB/s at n = 1 on Zen 4; README.md).
      const bool next = tiles > 1 && it + tiles - tile < end && pair + 1 < pairs;
      const int32_t step = 2 * kPanelRows / tiles;
      const float* prefetch =
          next ? panel + size_t(2 * k) * kPanelRows + size_t(tile) * step * k : panel;
      pick_kernel<E>(r1 - r0, np)(x + r0 * ldx, ldx, panel, k, y + r0 * ldy + col, ldy, valid,
                                  prefetch, next ? step : 0);
    }
  }
}

}  // namespace

void matmul_packed(const float* x, int64_t ldx, int32_t n, const float* packed_w, int32_t m,
                   int32_t k, float* y, int64_t ldy, bool accumulate) {
  if (n <= 0 || m <= 0) return;
  const int32_t panels = (m + kPanelRows - 1) / kPanelRows;
  if (accumulate)
    run_packed<Epilogue::accumulate>(x, ldx, n, packed_w, panels, k, y, ldy, m);
  else
    run_packed<Epilogue::store>(x, ldx, n, packed_w, panels, k, y, ldy, m);
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
  run_packed<Epilogue::swiglu>(x, ldx, n, packed_gate_up, panels, k, y, ldy, hidden);
}

void matmul_blas(const float* x, int64_t ldx, int32_t n, const float* w, int32_t m, int32_t k,
                 float* y, int64_t ldy, bool accumulate) {
  if (n <= 0 || m <= 0) return;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, m, k, 1.0f, x, int(ldx), w, k,
              accumulate ? 1.0f : 0.0f, y, int(ldy));
}

}  // namespace conveyor::kernels
