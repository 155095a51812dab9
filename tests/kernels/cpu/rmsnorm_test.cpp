#include "kernels/cpu/rmsnorm.hpp"

#include <gtest/gtest.h>

#include <cmath>

#include "tests/kernels/cpu/random.hpp"

namespace conveyor::kernels {
namespace {

TEST(RmsNorm, MatchesNaive) {
  for (int dim : {1, 8, 64, 288, 1000}) {
    const int n = 5;
    const int64_t ld = dim + 2;
    const std::vector<float> x = testing::random_vector(size_t(n) * ld, dim, -3.0f, 3.0f);
    const std::vector<float> w = testing::random_vector(dim, dim + 1);
    std::vector<float> out(size_t(n) * ld);
    rmsnorm(x.data(), ld, n, dim, w.data(), 1e-5f, out.data(), ld);
    for (int t = 0; t < n; ++t) {
      double ss = 0.0;
      for (int i = 0; i < dim; ++i) ss += double(x[t * ld + i]) * x[t * ld + i];
      const double inv = 1.0 / std::sqrt(ss / dim + 1e-5);
      for (int i = 0; i < dim; ++i)
        ASSERT_NEAR(out[t * ld + i], x[t * ld + i] * inv * w[i], 1e-5 * std::abs(inv) * 3.0)
            << "dim " << dim;
    }
  }
}

TEST(RmsNorm, InPlaceAndManyRows) {
  const int n = 300, dim = 288;  // big enough for the threaded path
  std::vector<float> x = testing::random_vector(size_t(n) * dim, 1);
  const std::vector<float> w(dim, 1.0f);
  std::vector<float> copy = x, expect(x.size());
  rmsnorm(copy.data(), dim, n, dim, w.data(), 1e-5f, expect.data(), dim);
  rmsnorm(x.data(), dim, n, dim, w.data(), 1e-5f, x.data(), dim);
  EXPECT_EQ(x, expect);
  // With unit weights every row comes out with mean square ~1.
  for (int t = 0; t < n; ++t) {
    double ss = 0.0;
    for (int i = 0; i < dim; ++i) ss += double(x[t * dim + i]) * x[t * dim + i];
    EXPECT_NEAR(ss / dim, 1.0, 1e-3);
  }
}

}  // namespace
}  // namespace conveyor::kernels
