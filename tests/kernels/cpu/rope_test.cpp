#include "kernels/cpu/rope.hpp"

#include <gtest/gtest.h>

#include <cmath>

#include "tests/kernels/cpu/random.hpp"

namespace conveyor::kernels {
namespace {

// Rotates one head the obvious way, in double.
void naive_rope(float* head, int rotary_dim, RopeStyle style, int pos, double theta) {
  const int half = rotary_dim / 2;
  for (int i = 0; i < half; ++i) {
    const double angle = pos * std::pow(theta, -2.0 * i / rotary_dim);
    const int a = style == RopeStyle::adjacent_pairs ? 2 * i : i;
    const int b = style == RopeStyle::adjacent_pairs ? 2 * i + 1 : i + half;
    const double x0 = head[a], x1 = head[b];
    head[a] = float(x0 * std::cos(angle) - x1 * std::sin(angle));
    head[b] = float(x0 * std::sin(angle) + x1 * std::cos(angle));
  }
}

TEST(Rope, BothLayoutsMatchNaiveWithPartialRotaryDim) {
  for (RopeStyle style : {RopeStyle::adjacent_pairs, RopeStyle::half_split})
    for (int rotary_dim : {16, 8}) {
      const int n = 6, heads = 3, hd = 16, max_pos = 1000;
      const int64_t ld = heads * hd + 4;
      std::vector<float> table(rope_table_floats(rotary_dim, max_pos));
      rope_table(10000.0f, rotary_dim, max_pos, table.data());
      std::vector<float> x = testing::random_vector(size_t(n) * ld, rotary_dim);
      std::vector<float> ref = x;
      const std::vector<int32_t> pos = {0, 1, 5, 17, 400, 999};
      rope_apply(x.data(), ld, n, heads, hd, rotary_dim, style, pos.data(), table.data());
      for (int t = 0; t < n; ++t)
        for (int h = 0; h < heads; ++h)
          naive_rope(ref.data() + t * ld + h * hd, rotary_dim, style, pos[t], 10000.0);
      for (size_t i = 0; i < x.size(); ++i) ASSERT_NEAR(x[i], ref[i], 2e-6) << i;
      // Position 0 is the identity; dims past rotary_dim never move.
      std::vector<float> orig = testing::random_vector(size_t(n) * ld, rotary_dim);
      for (int h = 0; h < heads; ++h)
        for (int d = 0; d < hd; ++d) ASSERT_NEAR(x[h * hd + d], orig[h * hd + d], 1e-7);
      for (int t = 0; t < n; ++t)
        for (int h = 0; h < heads; ++h)
          for (int d = rotary_dim; d < hd; ++d)
            ASSERT_EQ(x[t * ld + h * hd + d], orig[t * ld + h * hd + d]);
    }
}

TEST(Rope, LayoutsDifferAndPreservePairNorms) {
  const int hd = 8, max_pos = 10;
  std::vector<float> table(rope_table_floats(hd, max_pos));
  rope_table(10000.0f, hd, max_pos, table.data());
  const std::vector<float> x = testing::random_vector(hd, 4);
  std::vector<float> adj = x, split = x;
  const int32_t pos = 3;
  rope_apply(adj.data(), hd, 1, 1, hd, hd, RopeStyle::adjacent_pairs, &pos, table.data());
  rope_apply(split.data(), hd, 1, 1, hd, hd, RopeStyle::half_split, &pos, table.data());
  EXPECT_NE(adj, split);
  for (int i = 0; i < hd / 2; ++i) {
    EXPECT_NEAR(std::hypot(adj[2 * i], adj[2 * i + 1]), std::hypot(x[2 * i], x[2 * i + 1]), 1e-6);
    EXPECT_NEAR(std::hypot(split[i], split[i + hd / 2]), std::hypot(x[i], x[i + hd / 2]), 1e-6);
  }
}

}  // namespace
}  // namespace conveyor::kernels
