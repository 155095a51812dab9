// kernels/cpu/simd.hpp's horizontal reductions against plain loops.
#include "kernels/cpu/simd.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

// Sixteen-lane vectors in a build without AVX-512: see simd.hpp's -Wpsabi note.
#pragma GCC diagnostic ignored "-Wpsabi"

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

// The eight-lane twins (attention's vectors without AVX-512): hsum8, hsum
// and hmax over f32x8.
TEST(Simd, Hsum8SumsEachVectorIntoItsLane) {
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> dist(-1000, 1000);
  for (int round = 0; round < 50; ++round) {
    f32x8 a[8];
    float want[8] = {}, want_max[8];
    for (int i = 0; i < 8; ++i) {
      want_max[i] = -2000.0f;
      for (int l = 0; l < 8; ++l) {
        a[i][l] = float(dist(rng));
        want[i] += a[i][l];
        want_max[i] = std::max(want_max[i], a[i][l]);
      }
    }
    const f32x8 got = hsum8(a);
    for (int i = 0; i < 8; ++i) {
      ASSERT_EQ(got[i], want[i]) << "round " << round << " vector " << i;
      ASSERT_EQ(hsum(a[i]), want[i]);
      ASSERT_EQ(hmax(a[i]), want_max[i]);
    }
  }
}

}  // namespace
}  // namespace conveyor::kernels::simd
