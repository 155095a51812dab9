#include "kernels/cpu/swiglu.hpp"

#include <gtest/gtest.h>

#include <cmath>

#include "kernels/cpu/simd.hpp"
#include "tests/kernels/cpu/random.hpp"

namespace conveyor::kernels {
namespace {

TEST(FastExp, RelativeErrorUnderFewUlpOverSoftmaxRange) {
  double worst = 0.0;
  for (double x = -80.0; x <= 80.0; x += 0.001) {
    const double ref = std::exp(double(float(x)));
    worst = std::max(worst, std::abs(simd::exp_fast(float(x)) - ref) / ref);
  }
  EXPECT_LT(worst, 5e-7);
  EXPECT_EQ(simd::exp_fast(0.0f), 1.0f);
  EXPECT_LT(simd::exp_fast(-1000.0f), 1e-37f);  // clamped, not NaN
  EXPECT_GT(simd::exp_fast(1000.0f), 1e38f);
}

TEST(SwiGlu, MatchesNaiveIncludingLargeArguments) {
  const int n = 4, hidden = 70;
  const int64_t ld = 2 * hidden;
  std::vector<float> gu = testing::random_vector(size_t(n) * ld, 2, -30.0f, 30.0f);
  gu[0] = -200.0f;  // silu of a very negative gate is ~0, not NaN
  gu[1] = 200.0f;
  std::vector<float> out(size_t(n) * hidden);
  swiglu(gu.data(), gu.data() + hidden, ld, n, hidden, out.data(), hidden);
  for (int t = 0; t < n; ++t)
    for (int i = 0; i < hidden; ++i) {
      const double g = gu[t * ld + i], u = gu[t * ld + hidden + i];
      const double ref = g / (1.0 + std::exp(-g)) * u;
      ASSERT_NEAR(out[t * hidden + i], ref, 1e-5 * std::max(1.0, std::abs(ref)));
    }
}

TEST(SwiGlu, InPlaceIntoTheGateHalf) {
  const int n = 3, hidden = 33;
  const int64_t ld = 2 * hidden;
  std::vector<float> gu = testing::random_vector(size_t(n) * ld, 3);
  std::vector<float> separate(size_t(n) * hidden);
  swiglu(gu.data(), gu.data() + hidden, ld, n, hidden, separate.data(), hidden);
  swiglu(gu.data(), gu.data() + hidden, ld, n, hidden, gu.data(), ld);
  for (int t = 0; t < n; ++t)
    for (int i = 0; i < hidden; ++i) ASSERT_EQ(gu[t * ld + i], separate[t * hidden + i]);
}

}  // namespace
}  // namespace conveyor::kernels
