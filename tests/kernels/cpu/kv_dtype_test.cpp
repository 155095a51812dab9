// The KV cache's element conversions: kv_dtype.hpp's scalar functions against
// known values, and the vector paths the kernels use (kv_store, kv_load: F16C
// and AVX512-BF16 instructions where the build has them, vector extensions
// where not) against the scalar functions, bit for bit.
#include "kernels/cpu/kv_dtype.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/cpu/paged_attention.hpp"
#include "tests/kernels/cpu/isa_param.hpp"

namespace conveyor::kernels {
namespace {

using kv_half::bf16_to_f32;
using kv_half::f16_to_f32;
using kv_half::f32_to_bf16;
using kv_half::f32_to_f16;

float bits(uint32_t b) { return std::bit_cast<float>(b); }

TEST(KvDtype, SizesAndNames) {
  EXPECT_EQ(kv_bytes(KvDtype::f32, 3), 12u);
  EXPECT_EQ(kv_bytes(KvDtype::f16, 3), 6u);
  EXPECT_EQ(kv_bytes(KvDtype::bf16, 3), 6u);
  EXPECT_EQ(kv_bytes(KvDtype::q8_0, 64), 68u);  // two blocks of an f16 scale and 32 bytes
  EXPECT_STREQ(kv_dtype_name(KvDtype::bf16), "bf16");
  EXPECT_STREQ(kv_dtype_name(KvDtype::q8_0), "q8_0");
  EXPECT_TRUE(kv_dtype_fits(KvDtype::q8_0, 128));
  EXPECT_FALSE(kv_dtype_fits(KvDtype::q8_0, 48));
  EXPECT_TRUE(kv_dtype_fits(KvDtype::f16, 48));
}

// q8_0 against llama.cpp's block_q8_0 rule, written out: d = max|x| / 127 as
// an f16, q = x / d rounded (to nearest even), values d·q.
// kv_store and kv_load on the AVX2 (or the build's own) and the AVX-512
// compilation of the kernels (paged_attention.inc).
class KvConversions : public testing::IsaParamTest {};

TEST_P(KvConversions, Q8BlocksHoldAScaleAndRoundedBytes) {
  std::vector<float> x(64);
  for (int i = 0; i < 32; ++i) x[size_t(i)] = float(i - 16) * 0.25f;  // max |x| = 4
  for (int i = 32; i < 64; ++i) x[size_t(i)] = 0.0f;                  // an all-zero block
  x[40] = -1e-3f;
  std::vector<uint8_t> q(kv_bytes(KvDtype::q8_0, 64));
  kv_store(KvDtype::q8_0, x.data(), q.data(), 64);
  uint16_t d0;
  std::memcpy(&d0, q.data(), 2);
  EXPECT_EQ(d0, f32_to_f16(4.0f / 127.0f));
  EXPECT_EQ(int8_t(q[2 + 0]), -127);  // -4
  EXPECT_EQ(int8_t(q[2 + 16]), 0);
  EXPECT_EQ(int8_t(q[2 + 17]), 8);  // 0.25 · 127 / 4 = 7.94
  std::vector<float> back(64);
  kv_load(KvDtype::q8_0, q.data(), back.data(), 64);
  const float d = f16_to_f32(d0);
  for (int i = 0; i < 32; ++i) {
    const float want = d * float(int8_t(q[size_t(2 + i)]));
    EXPECT_EQ(back[size_t(i)], want) << i;
    EXPECT_LE(std::fabs(back[size_t(i)] - x[size_t(i)]), 0.51f * d + 1e-3f * 4.0f) << i;
  }
  // The second block: the one non-zero value sets its own scale.
  EXPECT_NEAR(back[40], -1e-3f, 1e-5f);
  EXPECT_EQ(back[41], 0.0f);
}

TEST_P(KvConversions, Q8RoundTripErrorIsHalfAStep) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> dist(-8.0f, 8.0f);
  std::vector<float> x(32 * 257), back(x.size());
  for (float& v : x) v = dist(rng);
  std::vector<uint8_t> q(kv_bytes(KvDtype::q8_0, int64_t(x.size())));
  kv_store(KvDtype::q8_0, x.data(), q.data(), int64_t(x.size()));
  kv_load(KvDtype::q8_0, q.data(), back.data(), int64_t(x.size()));
  for (size_t b = 0; b < x.size() / 32; ++b) {
    float amax = 0.0f;
    for (size_t i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[b * 32 + i]));
    const float step = amax / 127.0f;
    for (size_t i = 0; i < 32; ++i)  // half a step, and the f16 scale's rounding at 127 steps
      ASSERT_LE(std::fabs(back[b * 32 + i] - x[b * 32 + i]), step * (0.5f + 127.0f * 0x1p-11f)) << b << " " << i;
  }
}

TEST(KvDtype, F16KnownValues) {
  EXPECT_EQ(f32_to_f16(0.0f), 0x0000);
  EXPECT_EQ(f32_to_f16(-0.0f), 0x8000);
  EXPECT_EQ(f32_to_f16(1.0f), 0x3c00);
  EXPECT_EQ(f32_to_f16(-2.0f), 0xc000);
  EXPECT_EQ(f32_to_f16(65504.0f), 0x7bff);               // largest finite
  EXPECT_EQ(f32_to_f16(65519.996f), 0x7bff);             // below the midpoint to 65536
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00);               // the midpoint: to even, which is infinity
  EXPECT_EQ(f32_to_f16(1e10f), 0x7c00);
  EXPECT_EQ(f32_to_f16(-std::numeric_limits<float>::infinity()), 0xfc00);
  EXPECT_EQ(f32_to_f16(1.0f + 0x1p-11f), 0x3c00);        // tie: to even (down)
  EXPECT_EQ(f32_to_f16(1.0f + 3 * 0x1p-11f), 0x3c02);    // tie: to even (up)
  EXPECT_EQ(f32_to_f16(1.0f + 0x1p-11f + 0x1p-20f), 0x3c01);
  EXPECT_EQ(f32_to_f16(0x1p-14f), 0x0400);               // smallest normal
  EXPECT_EQ(f32_to_f16(0x1p-24f), 0x0001);               // smallest subnormal
  EXPECT_EQ(f32_to_f16(0x1p-25f), 0x0000);               // tie: to even (zero)
  EXPECT_EQ(f32_to_f16(3 * 0x1p-25f), 0x0002);           // tie: to even (two)
  EXPECT_EQ(f32_to_f16(0x1p-14f - 0x1p-26f), 0x0400);    // rounds up into the normals
  EXPECT_EQ(f32_to_f16(1e-30f), 0x0000);
  EXPECT_EQ(f32_to_f16(std::numeric_limits<float>::quiet_NaN()) & 0x7e00, 0x7e00);

  EXPECT_EQ(f16_to_f32(0x3c00), 1.0f);
  EXPECT_EQ(f16_to_f32(0x7bff), 65504.0f);
  EXPECT_EQ(f16_to_f32(0x0001), 0x1p-24f);
  EXPECT_EQ(f16_to_f32(0x83ff), -1023 * 0x1p-24f);
  EXPECT_EQ(f16_to_f32(0x7c00), std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(f16_to_f32(0x7e00)));
  EXPECT_TRUE(std::signbit(f16_to_f32(0x8000)));
}

TEST(KvDtype, Bf16KnownValues) {
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(f32_to_bf16(-1.0f), 0xbf80);
  EXPECT_EQ(f32_to_bf16(1.0f + 0x1p-8f), 0x3f80);        // tie: to even (down)
  EXPECT_EQ(f32_to_bf16(1.0f + 3 * 0x1p-8f), 0x3f82);    // tie: to even (up)
  EXPECT_EQ(f32_to_bf16(1.0f + 0x1p-8f + 0x1p-20f), 0x3f81);
  EXPECT_EQ(f32_to_bf16(std::numeric_limits<float>::max()), 0x7f80);  // rounds to infinity
  EXPECT_EQ(f32_to_bf16(1e-40f), 0x0000);                // float subnormal: zero
  EXPECT_EQ(f32_to_bf16(-1e-40f), 0x8000);
  EXPECT_EQ(f32_to_bf16(bits(0x7f800001u)), 0x7fc0);     // signalling NaN: quiet NaN
  EXPECT_EQ(bf16_to_f32(0x4049), bits(0x40490000u));
}

// Equal bits, or both NaN (hardware may quiet a NaN the scalar code keeps).
::testing::AssertionResult same(float got, float want) {
  if (std::bit_cast<uint32_t>(got) == std::bit_cast<uint32_t>(want) || (std::isnan(got) && std::isnan(want)))
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << got << " (0x" << std::hex << std::bit_cast<uint32_t>(got)
                                       << ") != " << want << " (0x" << std::bit_cast<uint32_t>(want) << ")";
}

TEST_P(KvConversions, ReadsEveryHalfExactly) {
  std::vector<uint16_t> all(65536 + 5);  // + a tail past the 16-wide vectors
  for (size_t i = 0; i < all.size(); ++i) all[i] = uint16_t(i);
  std::vector<float> out(all.size());
  kv_load(KvDtype::f16, all.data(), out.data(), int64_t(all.size()));
  for (size_t i = 0; i < all.size(); ++i) ASSERT_TRUE(same(out[i], f16_to_f32(all[i]))) << "f16 " << i;
  kv_load(KvDtype::bf16, all.data(), out.data(), int64_t(all.size()));
  for (size_t i = 0; i < all.size(); ++i) ASSERT_TRUE(same(out[i], bf16_to_f32(all[i]))) << "bf16 " << i;
}

// Floats of every kind: random bit patterns (all exponents, NaNs, subnormals),
// values near the ends of f16's range, and exact ties.
std::vector<float> test_floats() {
  std::vector<float> v;
  std::mt19937 rng(42);
  for (int i = 0; i < (1 << 18); ++i) v.push_back(bits(rng()));
  std::uniform_real_distribution<float> wide(-70000.0f, 70000.0f), narrow(-1e-4f, 1e-4f);
  for (int i = 0; i < (1 << 16); ++i) v.push_back(wide(rng));
  for (int i = 0; i < (1 << 16); ++i) v.push_back(narrow(rng));
  for (uint32_t m = 0; m < 4096; ++m) {
    v.push_back(bits(0x3f800000u | (m << 12) | 0x1000u));  // f16 ties around 1
    v.push_back(bits(0x3f800000u | (m << 12) | 0x8000u));  // bf16 ties around 1
  }
  for (float x : {0.0f, -0.0f, 65504.0f, 65520.0f, -65520.0f, 0x1p-24f, 0x1p-25f, 1e-40f, -1e-45f,
                  std::numeric_limits<float>::infinity(), std::numeric_limits<float>::max()})
    v.push_back(x);
  v.push_back(1.0f);  // an odd count: a tail after the vectors
  return v;
}

TEST_P(KvConversions, WritesRoundToNearestEvenLikeTheScalarCode) {
  const std::vector<float> x = test_floats();
  std::vector<uint16_t> h(x.size());
  kv_store(KvDtype::f16, x.data(), h.data(), int64_t(x.size()));
  for (size_t i = 0; i < x.size(); ++i)
    ASSERT_TRUE(same(f16_to_f32(h[i]), f16_to_f32(f32_to_f16(x[i])))) << "f16 of " << x[i];
  kv_store(KvDtype::bf16, x.data(), h.data(), int64_t(x.size()));
  for (size_t i = 0; i < x.size(); ++i)
    ASSERT_TRUE(same(bf16_to_f32(h[i]), bf16_to_f32(f32_to_bf16(x[i])))) << "bf16 of " << x[i];
}

TEST_P(KvConversions, RoundTripErrorIsHalfAnUlp) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> exponent(-14.0f, 15.0f);
  std::vector<float> x(10001);
  for (float& v : x) v = std::exp2(exponent(rng)) * (rng() % 2 ? 1.0f : -1.0f);
  std::vector<uint16_t> h(x.size());
  std::vector<float> back(x.size());
  for (auto [dtype, ulp] : {std::pair{KvDtype::f16, 0x1p-10}, std::pair{KvDtype::bf16, 0x1p-7}}) {
    kv_store(dtype, x.data(), h.data(), int64_t(x.size()));
    kv_load(dtype, h.data(), back.data(), int64_t(x.size()));
    for (size_t i = 0; i < x.size(); ++i)
      ASSERT_LE(std::abs(double(back[i]) - x[i]), std::abs(double(x[i])) * ulp / 2)
          << kv_dtype_name(dtype) << " " << x[i];
  }
  std::vector<float> f32_back(x.size());
  kv_store(KvDtype::f32, x.data(), f32_back.data(), int64_t(x.size()));
  EXPECT_EQ(f32_back, x);
}

CONVEYOR_INSTANTIATE_ISAS(KvConversions);

}  // namespace
}  // namespace conveyor::kernels
