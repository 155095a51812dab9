#include "kernels/cpu/matmul.hpp"

#include <gtest/gtest.h>

#include <cmath>

#include "kernels/cpu/matmul_blas.hpp"
#include "kernels/cpu/matmul_tiles.hpp"
#include "tests/kernels/cpu/isa_param.hpp"
#include "tests/kernels/cpu/random.hpp"

namespace conveyor::kernels {
namespace {

using testing::random_vector;
using testing::relative_error;

// y[i][j] = sum_c x[i][c] · w[j][c], in double.
std::vector<float> naive(const std::vector<float>& x, int64_t ldx, int n,
                         const std::vector<float>& w, int m, int k) {
  std::vector<float> y(size_t(n) * m);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < m; ++j) {
      double s = 0.0;
      for (int c = 0; c < k; ++c) s += double(x[i * ldx + c]) * w[size_t(j) * k + c];
      y[size_t(i) * m + j] = float(s);
    }
  return y;
}

TEST(Matmul, PackUnpackRoundTrip) {
  const int m = 37, k = 11;
  const std::vector<float> w = random_vector(size_t(m) * k, 1);
  std::vector<float> packed(packed_matrix_floats(m, k), -1.0f);
  pack_matrix(w.data(), m, k, packed.data());
  EXPECT_EQ(packed.size(), size_t(48) * k);
  std::vector<float> row(k);
  for (int r = 0; r < m; ++r) {
    unpack_row(packed.data(), k, r, row.data());
    for (int c = 0; c < k; ++c) ASSERT_EQ(row[c], w[size_t(r) * k + c]) << r << "," << c;
  }
  for (int r = m; r < 48; ++r) {  // padding rows are zero
    unpack_row(packed.data(), k, r, row.data());
    for (int c = 0; c < k; ++c) ASSERT_EQ(row[c], 0.0f);
  }
}

// The packed products on each instruction set's tiles (matmul_packed.inc):
// AVX2's 3-row tiles and AVX-512's 12-row ones, forced as the kernels choose
// them at run time.
class PackedMatmul : public testing::IsaParamTest {};

TEST_P(PackedMatmul, MatchesNaiveOverShapes) {
  uint32_t seed = 10;
  for (int n : {1, 2, 5, 11, 12, 13, 32, 64, 100})
    for (int m : {1, 15, 16, 17, 32, 33, 48, 100})
      for (int k : {1, 7, 64, 96}) {
        const int64_t ldx = k + 3, ldy = m + 5;
        const std::vector<float> x = random_vector(size_t(n) * ldx, ++seed);
        const std::vector<float> w = random_vector(size_t(m) * k, ++seed);
        std::vector<float> packed(packed_matrix_floats(m, k));
        pack_matrix(w.data(), m, k, packed.data());
        std::vector<float> y(size_t(n) * ldy, 7.0f);
        matmul_packed(x.data(), ldx, n, packed.data(), m, k, y.data(), ldy);
        const std::vector<float> ref = naive(x, ldx, n, w, m, k);
        for (int i = 0; i < n; ++i) {
          // Float rounding is bounded by k·eps·sum|x·w|; sum|x·w| <= k here.
          for (int j = 0; j < m; ++j)
            ASSERT_NEAR(y[i * ldy + j], ref[size_t(i) * m + j], 1e-6 * k)
                << "n=" << n << " m=" << m << " k=" << k << " at " << i << "," << j;
          for (int64_t j = m; j < ldy; ++j)  // columns past m are untouched
            ASSERT_EQ(y[i * ldy + j], 7.0f);
        }
      }
}

TEST_P(PackedMatmul, Accumulates) {
  const int n = 9, m = 40, k = 50;
  const std::vector<float> x = random_vector(size_t(n) * k, 3);
  const std::vector<float> w = random_vector(size_t(m) * k, 4);
  const std::vector<float> y0 = random_vector(size_t(n) * m, 5);
  std::vector<float> packed(packed_matrix_floats(m, k));
  pack_matrix(w.data(), m, k, packed.data());
  std::vector<float> y = y0;
  matmul_packed(x.data(), k, n, packed.data(), m, k, y.data(), m, /*accumulate=*/true);
  std::vector<float> ref = naive(x, k, n, w, m, k);
  for (size_t i = 0; i < ref.size(); ++i) ref[i] += y0[i];
  EXPECT_LT(relative_error(y.data(), ref.data(), ref.size()), 1e-5);
}

TEST_P(PackedMatmul, LargeProductUsesThreadsAndStaysExact) {
  // Large enough to run the parallel path; sizes as in llama-15m's FFN.
  const int n = 33, m = 768, k = 288;
  const std::vector<float> x = random_vector(size_t(n) * k, 6);
  const std::vector<float> w = random_vector(size_t(m) * k, 7);
  std::vector<float> packed(packed_matrix_floats(m, k));
  pack_matrix(w.data(), m, k, packed.data());
  std::vector<float> y(size_t(n) * m);
  matmul_packed(x.data(), k, n, packed.data(), m, k, y.data(), m);
  const std::vector<float> ref = naive(x, k, n, w, m, k);
  EXPECT_LT(relative_error(y.data(), ref.data(), ref.size()), 1e-5);
}

TEST_P(PackedMatmul, FusedSwigluMatchesNaive) {
  uint32_t seed = 50;
  for (int n : {1, 7, 12, 30})
    for (int hidden : {1, 16, 17, 40, 100})
      for (int k : {5, 64}) {
        const int64_t ldx = k + 1, ldy = hidden + 3;
        const std::vector<float> x = random_vector(size_t(n) * ldx, ++seed, -2.0f, 2.0f);
        const std::vector<float> gate = random_vector(size_t(hidden) * k, ++seed);
        const std::vector<float> up = random_vector(size_t(hidden) * k, ++seed);
        std::vector<float> packed(packed_gate_up_floats(hidden, k));
        pack_gate_up(gate.data(), up.data(), hidden, k, packed.data());
        std::vector<float> y(size_t(n) * ldy, 7.0f);
        matmul_packed_swiglu(x.data(), ldx, n, packed.data(), hidden, k, y.data(), ldy);
        const std::vector<float> g = naive(x, ldx, n, gate, hidden, k);
        const std::vector<float> u = naive(x, ldx, n, up, hidden, k);
        for (int i = 0; i < n; ++i) {
          for (int j = 0; j < hidden; ++j) {
            const double gv = g[size_t(i) * hidden + j], uv = u[size_t(i) * hidden + j];
            const double want = gv / (1.0 + std::exp(-gv)) * uv;
            ASSERT_NEAR(y[i * ldy + j], want, 1e-5 * k)
                << "n=" << n << " hidden=" << hidden << " k=" << k << " at " << i << "," << j;
          }
          for (int64_t j = hidden; j < ldy; ++j) ASSERT_EQ(y[i * ldy + j], 7.0f);
        }
      }
}

CONVEYOR_INSTANTIATE_ISAS(PackedMatmul);

// The tiles built with the build's own flags, which CPUs without AVX2 run.
TEST(Matmul, BaseTilesMatchNaive) {
  uint32_t seed = 200;
  for (int n : {1, 2, 3, 13})
    for (int m : {15, 33}) {
      const int k = 40;
      const std::vector<float> x = random_vector(size_t(n) * k, ++seed);
      const std::vector<float> w = random_vector(size_t(m) * k, ++seed);
      std::vector<float> packed(packed_matrix_floats(m, k));
      pack_matrix(w.data(), m, k, packed.data());
      std::vector<float> y(size_t(n) * m, 7.0f);
      const int32_t panels = (m + kPanelRows - 1) / kPanelRows;
      base::run_packed(Epilogue::store, x.data(), k, n, packed.data(), panels, k, y.data(), m, m);
      const std::vector<float> ref = naive(x, k, n, w, m, k);
      EXPECT_LT(relative_error(y.data(), ref.data(), ref.size()), 1e-5) << "n=" << n << " m=" << m;
    }
}

TEST(Matmul, BlasMatchesNaive) {
  for (bool accumulate : {false, true}) {
    const int n = 7, m = 45, k = 30;
    const int64_t ldx = 32, ldy = 50;
    const std::vector<float> x = random_vector(size_t(n) * ldx, 8);
    const std::vector<float> w = random_vector(size_t(m) * k, 9);
    std::vector<float> y(size_t(n) * ldy, 1.0f);
    matmul_blas(x.data(), ldx, n, w.data(), m, k, y.data(), ldy, accumulate);
    const std::vector<float> ref = naive(x, ldx, n, w, m, k);
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < m; ++j)
        ASSERT_NEAR(y[i * ldy + j], ref[size_t(i) * m + j] + (accumulate ? 1.0f : 0.0f), 1e-5);
  }
}

}  // namespace
}  // namespace conveyor::kernels
