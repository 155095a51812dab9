// kernels/cpu/simd.hpp's horizontal reductions against plain loops.
#include "kernels/cpu/simd.hpp"

#include <gtest/gtest.h>

#include <random>

namespace conveyor::kernels::simd {
namespace {

// Sixteen vectors of integers (whose float sums are exact in any order):
// lane i of hsum16 is vector i's sum, and each agrees with hsum.
TEST(Simd, Hsum16SumsEachVectorIntoItsLane) {
  std::mt19937 rng(3);
  std::uniform_int_distribution<int> dist(-1000, 1000);
  for (int round = 0; round < 50; ++round) {
    f32x16 a[16];
    float want[16] = {};
    for (int i = 0; i < 16; ++i)
      for (int l = 0; l < 16; ++l) {
        a[i][l] = float(dist(rng));
        want[i] += a[i][l];
      }
    const f32x16 got = hsum16(a);
    for (int i = 0; i < 16; ++i) {
      ASSERT_EQ(got[i], want[i]) << "round " << round << " vector " << i;
      ASSERT_EQ(hsum(a[i]), want[i]);
    }
  }
}

}  // namespace
}  // namespace conveyor::kernels::simd
