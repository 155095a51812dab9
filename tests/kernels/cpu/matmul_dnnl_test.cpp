#include "kernels/cpu/matmul_dnnl.hpp"

#include <gtest/gtest.h>

#include <cstring>

#include "tests/kernels/cpu/random.hpp"

namespace conveyor::kernels {
namespace {

using testing::random_vector;

// y[i][j] = sum_c x[i][c] · w[j][c], in double.
std::vector<double> naive(const std::vector<float>& x, int64_t ldx, int n,
                          const std::vector<float>& w, int m, int k) {
  std::vector<double> y(size_t(n) * m);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < m; ++j) {
      double s = 0.0;
      for (int c = 0; c < k; ++c) s += double(x[i * ldx + c]) * w[size_t(j) * k + c];
      y[size_t(i) * m + j] = s;
    }
  return y;
}

// Shapes around the layout's blocks (m in 64s, k in 16s), strided x and y,
// store and accumulate, several batch sizes on one object (one primitive each).
TEST(MatmulDnnl, MatchesNaiveOverShapes) {
  uint32_t seed = 100;
  for (int m : {1, 17, 63, 64, 65, 130})
    for (int k : {1, 15, 16, 33, 96}) {
      const std::vector<float> w = random_vector(size_t(m) * k, ++seed);
      DnnlMatmul mm(w.data(), m, k);
      ASSERT_EQ(mm.rows(), m);
      ASSERT_EQ(mm.cols(), k);
      for (int n : {1, 3, 12, 32, 70})
        for (bool accumulate : {false, true}) {
          const int64_t ldx = k + 3, ldy = m + 5;
          const std::vector<float> x = random_vector(size_t(n) * ldx, ++seed);
          std::vector<float> y = random_vector(size_t(n) * ldy, ++seed);
          const std::vector<float> y0 = y;
          mm.run(x.data(), ldx, n, y.data(), ldy, accumulate);
          const std::vector<double> ref = naive(x, ldx, n, w, m, k);
          for (int i = 0; i < n; ++i) {
            for (int j = 0; j < m; ++j) {
              const double want = ref[size_t(i) * m + j] + (accumulate ? y0[i * ldy + j] : 0.0);
              // Rounding is bounded by k·eps·sum|x·w| (<= k here), plus y0.
              ASSERT_NEAR(y[i * ldy + j], want, 2e-6 * (k + 1) * (k + 2))
                  << "m=" << m << " k=" << k << " n=" << n << " acc=" << accumulate << " at "
                  << i << "," << j;
            }
            for (int64_t j = m; j < ldy; ++j)  // past m, y is untouched
              ASSERT_EQ(y[i * ldy + j], y0[i * ldy + j]);
          }
        }
    }
}

// The same object called again with a batch size it has seen (cached
// primitive) gives the same result, and uses the blocked brgemm path.
TEST(MatmulDnnl, CachedPrimitiveIsReused) {
  const int m = 288, k = 288;
  const std::vector<float> w = random_vector(size_t(m) * k, 7);
  DnnlMatmul mm(w.data(), m, k);
  EXPECT_GE(mm.packed_bytes(), size_t(m) * k * sizeof(float));
  const std::vector<float> x = random_vector(size_t(8) * k, 8);
  std::vector<float> a(size_t(8) * m), b(size_t(8) * m);
  mm.run(x.data(), k, 8, a.data(), m);
  mm.run(x.data(), k, 1, b.data(), m);
  mm.run(x.data(), k, 8, b.data(), m);
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)));
  EXPECT_NE(std::string(mm.implementation(8)).find("brg"), std::string::npos)
      << mm.implementation(8);
}

}  // namespace
}  // namespace conveyor::kernels
