// The Q4_0 / Q4_K / Q5_K / Q6_K encoders (quantize.hpp): their error on
// random data, and agreement with llama.cpp's quantizer on the shared
// llama.cpp-made files.
#include "model/formats/quantize.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <iostream>
#include <limits>
#include <map>
#include <random>
#include <vector>

#include "model/formats/gguf_reader.hpp"
#include "model/formats/tensor_convert.hpp"
#include "tests/model/formats/formats_test_util.hpp"

namespace conveyor {
namespace {

using test::rms_relative_error;

const GgmlType kNewTypes[] = {GgmlType::Q4_0, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K};

std::string type_name(GgmlType t) { return ggml_type_traits(uint32_t(t)).name; }

std::vector<float> round_trip(GgmlType type, const std::vector<float>& x) {
  std::vector<uint8_t> enc(encoded_size(type, x.size()));
  std::vector<float> out(x.size(), std::numeric_limits<float>::quiet_NaN());
  EXPECT_FALSE(enc.empty());
  EXPECT_TRUE(encode_from_f32(type, x, enc));
  EXPECT_TRUE(decode_to_f32(type, enc, out));
  return out;
}

struct Shape {
  size_t rows, cols;
};
// Row lengths that are multiples of 256, as the K-quants need.
const Shape kShapes[] = {{1, 256}, {7, 512}, {3, 768}, {16, 4096}, {64, 256}};

enum class Data { gaussian, outliers, zero_blocks };

std::vector<float> make_data(Shape s, Data kind, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.02f);  // the scale of trained weights
  std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
  std::vector<float> x(s.rows * s.cols);
  for (size_t i = 0; i < x.size(); ++i) {
    x[i] = normal(rng);
    if (kind == Data::outliers && uniform(rng) < 0.005f) x[i] *= 30.0f;
    // Every third block of 256 (one Q4_0 block in three of 32 too) is zero.
    if (kind == Data::zero_blocks && (i / 256) % 3 == 1) x[i] = 0.0f;
  }
  return x;
}

// RMS relative error bounds, a little above the largest measured over the
// shapes above. Gaussian data: Q4_0 0.087, Q4_K 0.073, Q5_K 0.037, Q6_K 0.018.
// With 0.5% of the values 30x larger, which stretch their blocks' scales:
// Q4_0 0.163, Q4_K 0.097, Q5_K 0.050, Q6_K 0.034. (ggml's own quantizers give
// the same bytes, so the same errors.)
double gaussian_bound(GgmlType t) {
  switch (t) {
    case GgmlType::Q4_0: return 0.095;
    case GgmlType::Q4_K: return 0.078;
    case GgmlType::Q5_K: return 0.039;
    case GgmlType::Q6_K: return 0.020;
    default: return 0;
  }
}
double outlier_bound(GgmlType t) {
  switch (t) {
    case GgmlType::Q4_0: return 0.175;
    case GgmlType::Q4_K: return 0.105;
    case GgmlType::Q5_K: return 0.055;
    case GgmlType::Q6_K: return 0.038;
    default: return 0;
  }
}

TEST(Quantize, ErrorIsBoundedPerType) {
  for (GgmlType type : kNewTypes) {
    double worst_gaussian = 0, worst_outliers = 0;
    for (const Shape& s : kShapes) {
      SCOPED_TRACE(type_name(type) + " " + std::to_string(s.rows) + "x" + std::to_string(s.cols));
      const std::vector<float> g = make_data(s, Data::gaussian, uint32_t(s.rows * s.cols));
      const double eg = rms_relative_error(g, round_trip(type, g));
      EXPECT_LT(eg, gaussian_bound(type));
      const std::vector<float> o = make_data(s, Data::outliers, uint32_t(s.cols + 1));
      const double eo = rms_relative_error(o, round_trip(type, o));
      EXPECT_LT(eo, outlier_bound(type));
      worst_gaussian = std::max(worst_gaussian, eg);
      worst_outliers = std::max(worst_outliers, eo);
    }
    std::cout << type_name(type) << ": RMS relative error, Gaussian " << worst_gaussian
              << ", with outliers " << worst_outliers << "\n";
  }
}

TEST(Quantize, ZeroBlocksDecodeToZeroAndOthersStayBounded) {
  for (GgmlType type : kNewTypes) {
    SCOPED_TRACE(type_name(type));
    const Shape s{8, 1024};
    const std::vector<float> x = make_data(s, Data::zero_blocks, 7);
    const std::vector<float> y = round_trip(type, x);
    for (size_t i = 0; i < x.size(); ++i)
      if (x[i] == 0.0f) {
        ASSERT_EQ(y[i], 0.0f) << i;
      }
    EXPECT_LT(rms_relative_error(x, y), gaussian_bound(type));
    // A whole block of zeros is stored as zeros (scales included), as ggml does.
    std::vector<float> zeros(256, 0.0f);
    std::vector<uint8_t> enc(encoded_size(type, zeros.size()), 0xAB);
    ASSERT_TRUE(encode_from_f32(type, zeros, enc));
    std::vector<float> back(256, 1.0f);
    ASSERT_TRUE(decode_to_f32(type, enc, back));
    for (float v : back) EXPECT_EQ(v, 0.0f);
  }
}

TEST(Quantize, ExtremeValuesStayInRange) {
  // Constant blocks, one huge value, tiny values, all-negative blocks: the
  // decoded values stay finite and within the block's range (plus one step).
  std::vector<float> x(4 * 256);
  for (size_t i = 0; i < 256; ++i) x[i] = 0.5f;
  for (size_t i = 256; i < 512; ++i) x[i] = i == 300 ? 1000.0f : 0.001f * float(i % 7);
  for (size_t i = 512; i < 768; ++i) x[i] = 1e-30f * float(i % 5);
  for (size_t i = 768; i < 1024; ++i) x[i] = -1.0f - float(i % 11);
  for (GgmlType type : kNewTypes) {
    SCOPED_TRACE(type_name(type));
    const std::vector<float> y = round_trip(type, x);
    for (size_t b = 0; b < 4; ++b) {
      float amax = 0;
      for (size_t i = b * 256; i < (b + 1) * 256; ++i) amax = std::max(amax, std::fabs(x[i]));
      for (size_t i = b * 256; i < (b + 1) * 256; ++i) {
        ASSERT_TRUE(std::isfinite(y[i])) << i;
        ASSERT_LE(std::fabs(y[i]), amax * 1.2f + 1e-30f) << i;
      }
    }
    // The block of 1000 among small values keeps the large one close.
    EXPECT_NEAR(y[300], 1000.0f, 1000.0f * 0.07f);
    // Non-finite input gives some block (as in ggml), without crashing.
    std::vector<float> bad(256, 1.0f);
    bad[3] = std::numeric_limits<float>::infinity();
    bad[9] = std::numeric_limits<float>::quiet_NaN();
    std::vector<uint8_t> enc(encoded_size(type, bad.size()));
    EXPECT_TRUE(encode_from_f32(type, bad, enc));
  }
}

TEST(Quantize, SizesAndRefusals) {
  EXPECT_EQ(encoded_size(GgmlType::Q4_0, 64), 36u);
  EXPECT_EQ(encoded_size(GgmlType::Q4_K, 512), 288u);
  EXPECT_EQ(encoded_size(GgmlType::Q5_K, 256), 176u);
  EXPECT_EQ(encoded_size(GgmlType::Q6_K, 768), 630u);
  EXPECT_EQ(encoded_size(GgmlType::Q4_K, 255), 0u);
  EXPECT_EQ(encoded_size(GgmlType::Q4_0, 48), 0u);
  EXPECT_EQ(encoded_size(GgmlType::Q2_K, 256), 0u);  // not convertible
  std::vector<float> x(128, 1.0f);
  std::vector<uint8_t> buf(144);
  EXPECT_FALSE(encode_from_f32(GgmlType::Q4_K, x, buf));  // 128 is not a multiple of 256
  EXPECT_FALSE(encode_from_f32(GgmlType::Q2_K, x, buf));
  x.resize(256);
  EXPECT_TRUE(encode_from_f32(GgmlType::Q4_K, x, buf));
  EXPECT_FALSE(decode_to_f32(GgmlType::Q5_K, buf, x));  // 144 bytes are not 256 Q5_K values
}

// FNV-1a, to fingerprint re-encoded bytes.
uint64_t fnv1a(uint64_t h, std::span<const uint8_t> bytes) {
  for (uint8_t b : bytes) {
    h ^= b;
    h *= 0x100000001b3ull;
  }
  return h;
}

struct Reencoded {
  size_t blocks = 0;
  size_t same = 0;  // blocks re-encoded to the file's bytes exactly
  uint64_t fingerprint = 0xcbf29ce484222325ull;
};

// For every Q4_0 / K-quant matrix of a llama.cpp-made file (its first 4096
// blocks, to keep the test quick): decode the blocks, encode the values again,
// and compare with the file's bytes, per type.
std::map<GgmlType, Reencoded> reencode_file(const std::string& path) {
  std::map<GgmlType, Reencoded> out;
  auto file = read_gguf(path);
  EXPECT_TRUE(file) << file.error().message;
  if (!file) return out;
  for (const GgufTensorInfo& t : file->tensors) {
    const GgmlType type = GgmlType(t.type);
    if (type != GgmlType::Q4_0 && type != GgmlType::Q4_K && type != GgmlType::Q5_K &&
        type != GgmlType::Q6_K)
      continue;
    const GgmlTypeTraits traits = ggml_type_traits(t.type);
    const size_t blocks = std::min<size_t>(t.n_elements / traits.block_size, 4096);
    const std::span<const uint8_t> stored = t.data.first(blocks * traits.type_size);
    std::vector<float> values(blocks * traits.block_size);
    EXPECT_TRUE(decode_to_f32(type, stored, values));
    std::vector<uint8_t> again(stored.size());
    EXPECT_TRUE(encode_from_f32(type, values, again));
    Reencoded& r = out[type];
    r.blocks += blocks;
    for (size_t b = 0; b < blocks; ++b)
      r.same += std::memcmp(again.data() + b * traits.type_size,
                            stored.data() + b * traits.type_size, traits.type_size) == 0;
    r.fingerprint = fnv1a(r.fingerprint, again);
  }
  return out;
}

// llama.cpp's llama-quantize made these files from float32 weights we do not
// have. A block decoded and encoded again by the same quantizer mostly comes
// back to the same bytes: always for Q4_0, almost always for Q4_K, less often
// for Q5_K and Q6_K, whose scale searches do not always land on the grid they
// came from. ggml's own quantize_row_*_ref run on the same decoded values
// gives exactly the fractions below and exactly the re-encoded bytes
// fingerprinted here: that was measured by building ggml/src/ggml-quants.c
// (llama.cpp c392e50, 2025-02-20, as its ggml-base library is built: C11, no
// -march, so no FMA) beside these encoders. So the fingerprints check every
// re-encoded byte against ggml, including the blocks that do not come back.
struct Expected {
  const char* file;
  GgmlType type;
  size_t blocks, same;
  uint64_t fingerprint;
};
const Expected kLlamaCpp[] = {
    {"tiny-llama2-q4_0.gguf", GgmlType::Q4_0, 40960, 40960, 0x1b01e6ce54768f95ull},
    {"tiny-llama2-q4_0.gguf", GgmlType::Q6_K, 4096, 3312, 0x35ad8ae3b5bb60a5ull},
    {"tiny-llama2-q4_k_m.gguf", GgmlType::Q4_K, 9344, 9339, 0x5b0de224c428144bull},
    {"tiny-llama2-q4_k_m.gguf", GgmlType::Q6_K, 4992, 4035, 0x6922616257412cb6ull},
    {"tiny-llama2-q5_k_m.gguf", GgmlType::Q5_K, 9344, 8713, 0x76e7b3aa043a1d5aull},
    {"tiny-llama2-q5_k_m.gguf", GgmlType::Q6_K, 4992, 4035, 0x6922616257412cb6ull},
};

TEST(Quantize, ReencodesLlamaCppBlocksAsLlamaCppDoes) {
  std::map<std::string, std::map<GgmlType, Reencoded>> files;
  for (const Expected& e : kLlamaCpp) {
    CONVEYOR_REQUIRE_MODEL(path, e.file);
    if (!files.contains(e.file)) files[e.file] = reencode_file(path);
    const Reencoded& r = files[e.file][e.type];
    SCOPED_TRACE(std::string(e.file) + " " + type_name(e.type));
    std::cout << e.file << " " << type_name(e.type) << ": " << r.same << " of " << r.blocks
              << " blocks re-encode to llama.cpp's bytes (" << double(r.same) / double(r.blocks)
              << ")\n";
    EXPECT_EQ(r.blocks, e.blocks);
    EXPECT_EQ(r.same, e.same);
    EXPECT_EQ(r.fingerprint, e.fingerprint) << std::hex << r.fingerprint;
  }
  // The fractions themselves, as a floor that does not depend on the
  // fingerprints above.
  const std::map<GgmlType, double> floor = {{GgmlType::Q4_0, 1.0},
                                            {GgmlType::Q4_K, 0.999},
                                            {GgmlType::Q5_K, 0.93},
                                            {GgmlType::Q6_K, 0.80}};
  for (const auto& [name, types] : files)
    for (const auto& [type, r] : types)
      EXPECT_GE(double(r.same) / double(r.blocks), floor.at(type)) << name << " " << type_name(type);
}

}  // namespace
}  // namespace conveyor
