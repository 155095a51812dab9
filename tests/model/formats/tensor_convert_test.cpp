#include "model/formats/tensor_convert.hpp"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <vector>

namespace conveyor {
namespace {

TEST(TensorConvert, HalfKnownValues) {
  EXPECT_EQ(float_to_half(0.0f), 0x0000);
  EXPECT_EQ(float_to_half(-0.0f), 0x8000);
  EXPECT_EQ(float_to_half(1.0f), 0x3c00);
  EXPECT_EQ(float_to_half(-2.0f), 0xc000);
  EXPECT_EQ(float_to_half(65504.0f), 0x7bff);          // largest finite half
  EXPECT_EQ(float_to_half(65520.0f), 0x7c00);          // rounds up to infinity
  EXPECT_EQ(float_to_half(0x1p-24f), 0x0001);          // smallest subnormal
  EXPECT_EQ(float_to_half(0x1p-25f), 0x0000);          // tie: rounds to even (zero)
  EXPECT_EQ(float_to_half(0x1.8p-25f), 0x0001);        // above the tie
  EXPECT_EQ(float_to_half(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(float_to_half(std::nanf("")) & 0x7c00, 0x7c00);
  EXPECT_NE(float_to_half(std::nanf("")) & 0x03ff, 0);
  // 1 + 2^-11 is exactly between 1 and 1 + 2^-10: ties go to the even mantissa.
  EXPECT_EQ(float_to_half(1.0f + 0x1p-11f), 0x3c00);
  EXPECT_EQ(float_to_half(1.0f + 3 * 0x1p-11f), 0x3c02);
  EXPECT_FLOAT_EQ(half_to_float(0x3555), 0.333251953125f);
  EXPECT_EQ(half_to_float(0x0001), 0x1p-24f);
  EXPECT_TRUE(std::isinf(half_to_float(0xfc00)));
  EXPECT_TRUE(std::isnan(half_to_float(0x7e00)));
}

TEST(TensorConvert, EveryHalfRoundTrips) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = half_to_float(uint16_t(h));
    if (std::isnan(f)) continue;
    ASSERT_EQ(float_to_half(f), h) << "half 0x" << std::hex << h;
  }
}

TEST(TensorConvert, BulkHalfDecodeMatchesScalar) {
  // decode_to_f32 may use a vectorized path; it must agree with half_to_float
  // on every half, including subnormals, infinities and NaN payloads.
  std::vector<uint8_t> src(2 * 0x10000 + 2 * 3);  // odd tail after full vectors
  for (uint32_t h = 0; h < 0x10003; ++h) {
    src[2 * h] = uint8_t(h & 0xff);
    src[2 * h + 1] = uint8_t((h >> 8) & 0xff);
  }
  std::vector<float> dst(0x10003);
  ASSERT_TRUE(decode_to_f32(GgmlType::F16, src, dst));
  for (uint32_t h = 0; h < 0x10003; ++h)
    ASSERT_EQ(std::bit_cast<uint32_t>(dst[h]), std::bit_cast<uint32_t>(half_to_float(uint16_t(h))))
        << std::hex << h;
}

TEST(TensorConvert, HalfRoundingIsNearest) {
  // For floats between neighbouring halves, the result is the closer one.
  for (float x = -70000.0f; x < 70000.0f; x += 13.37f) {
    const float y = half_to_float(float_to_half(x));
    if (std::isinf(y)) continue;
    const uint16_t h = float_to_half(x);
    auto distance = [&](uint16_t other) {
      const float v = half_to_float(other);
      return std::isnan(v) ? std::numeric_limits<float>::infinity() : std::fabs(v - x);
    };
    EXPECT_LE(std::fabs(y - x), distance(uint16_t(h + 1))) << x;
    EXPECT_LE(std::fabs(y - x), distance(uint16_t(h - 1))) << x;
  }
}

TEST(TensorConvert, Bf16) {
  EXPECT_EQ(float_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(bf16_to_float(0x3f80), 1.0f);
  EXPECT_EQ(bf16_to_float(0xc040), -3.0f);
  // 1 + 2^-8 is a tie between bf16 1 and 1 + 2^-7: goes to even.
  EXPECT_EQ(float_to_bf16(1.0f + 0x1p-8f), 0x3f80);
  EXPECT_EQ(float_to_bf16(1.0f + 3 * 0x1p-8f), 0x3f82);
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(std::nanf("")))));
}

TEST(TensorConvert, Q8_0EncodesLikeGgml) {
  std::vector<float> x(64);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(float(i)) * (i < 32 ? 1.0f : 0.01f);
  std::vector<uint8_t> q(encoded_size(GgmlType::Q8_0, x.size()));
  ASSERT_EQ(q.size(), 2 * kQ8_0BlockBytes);
  ASSERT_TRUE(encode_from_f32(GgmlType::Q8_0, x, q));
  std::vector<float> y(x.size());
  ASSERT_TRUE(decode_to_f32(GgmlType::Q8_0, q, y));
  for (size_t b = 0; b < 2; ++b) {
    float amax = 0;
    for (size_t j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[b * 32 + j]));
    const uint16_t d_bits = uint16_t(q[b * 34] | (q[b * 34 + 1] << 8));
    EXPECT_EQ(d_bits, float_to_half(amax / 127.0f));
    for (size_t j = 0; j < 32; ++j) {
      // The largest magnitude maps to +-127; every value is within half a step.
      EXPECT_LE(std::fabs(y[b * 32 + j] - x[b * 32 + j]), amax / 127.0f * 0.51f);
    }
  }
  // An all-zero block has scale 0 and decodes to zeros.
  std::vector<float> zeros(32, 0.0f), back(32, 1.0f);
  std::vector<uint8_t> qz(kQ8_0BlockBytes);
  ASSERT_TRUE(encode_from_f32(GgmlType::Q8_0, zeros, qz));
  ASSERT_TRUE(decode_to_f32(GgmlType::Q8_0, qz, back));
  for (float v : back) EXPECT_EQ(v, 0.0f);
}

TEST(TensorConvert, RefusesWrongSizesAndTypes) {
  std::vector<float> x(33, 1.0f);
  std::vector<uint8_t> buf(100);
  EXPECT_EQ(encoded_size(GgmlType::Q8_0, 33), 0u);
  EXPECT_FALSE(encode_from_f32(GgmlType::Q8_0, x, buf));
  EXPECT_FALSE(encode_from_f32(GgmlType::F16, x, buf));  // needs 66 bytes
  EXPECT_FALSE(decode_to_f32(GgmlType::Q4_K, buf, x));
  EXPECT_FALSE(decode_to_f32(GgmlType::F32, std::span<const uint8_t>(buf.data(), 4), x));
  std::vector<uint8_t> f16(66);
  EXPECT_TRUE(encode_from_f32(GgmlType::F16, x, f16));
}

}  // namespace
}  // namespace conveyor
