// The products on file-encoded weights (quant_matmul.hpp) against a plain
// scalar reference: dequantize W with dequantize_row (ggml's decoders), and
// for the integer types quantize x per block the way the kernels do, then
// multiply in double. Every type, several shapes, batch sizes 1 to 256, every
// instruction-set path (AMX on an emulated tile unit where the CPU has none).
#include "kernels/cpu/quant_matmul.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu/quant_formats.hpp"
#include "tests/kernels/cpu/isa_param.hpp"

namespace conveyor::kernels {
namespace {

const WeightType kTypes[] = {WeightType::q8_0, WeightType::q4_0, WeightType::q4_k,
                             WeightType::q5_k, WeightType::q6_k, WeightType::f16,
                             WeightType::bf16};

// Random rows of `type`: random quant bits with sane f16 scales.
std::vector<uint8_t> random_rows(WeightType type, int32_t m, int32_t k, uint32_t seed) {
  std::mt19937 rng(seed);
  const size_t rb = row_bytes(type, k);
  std::vector<uint8_t> w(size_t(m) * rb);
  for (uint8_t& b : w) b = uint8_t(rng());
  std::uniform_real_distribution<float> scale(0.001f, 0.02f), value(-1.0f, 1.0f);
  auto put_half = [](uint8_t* at, float v) {
    const uint16_t h = f32_to_fp16(v);
    std::memcpy(at, &h, 2);
  };
  const WeightTypeTraits t = weight_type_traits(type);
  for (int32_t r = 0; r < m; ++r) {
    uint8_t* row = w.data() + r * rb;
    for (int32_t b = 0; b < k / t.block_elems; ++b) {
      uint8_t* blk = row + b * t.block_bytes;
      switch (type) {
        case WeightType::q8_0:
        case WeightType::q4_0: put_half(blk, scale(rng)); break;
        case WeightType::q4_k:
        case WeightType::q5_k:
          put_half(blk, scale(rng));
          put_half(blk + 2, scale(rng));
          break;
        case WeightType::q6_k: put_half(blk + 208, scale(rng) / 64); break;
        case WeightType::f16: put_half(blk, value(rng)); break;
        case WeightType::bf16: {
          const float v = value(rng);
          uint32_t bits;
          std::memcpy(&bits, &v, 4);
          const uint16_t h = uint16_t(bits >> 16);
          std::memcpy(blk, &h, 2);
          break;
        }
        case WeightType::f32: break;
      }
    }
  }
  return w;
}

// x as the integer kernels see it: per block, q = round(x · 127 / max|x|),
// the blocks of 256 values for the K-quants (as llama.cpp's Q8_K) and of 32
// for the others.
std::vector<float> as_quantized(WeightType type, const std::vector<float>& x, int32_t k) {
  if (type == WeightType::f16 || type == WeightType::bf16) return x;
  const bool k_quant = type == WeightType::q4_k || type == WeightType::q5_k || type == WeightType::q6_k;
  const int32_t block = k_quant ? 256 : 32;
  std::vector<float> out(x.size());
  for (size_t b = 0; b < x.size(); b += size_t(block)) {
    float amax = 0;
    for (int32_t j = 0; j < block; ++j) amax = std::max(amax, std::abs(x[b + j]));
    const float d = amax / 127.0f, inv = amax > 0 ? 127.0f / amax : 0.0f;
    for (int32_t j = 0; j < block; ++j) out[b + j] = d * std::nearbyint(x[b + j] * inv);
  }
  (void)k;
  return out;
}

// x rounded to bf16, to nearest with ties to even.
std::vector<float> as_bf16(const std::vector<float>& x) {
  std::vector<float> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    uint32_t bits;
    std::memcpy(&bits, &x[i], 4);
    bits = (bits + 0x7fff + ((bits >> 16) & 1)) & 0xffff0000u;
    std::memcpy(&out[i], &bits, 4);
  }
  return out;
}

struct Case {
  int32_t m, k, n;
};

class QuantMatmul : public testing::IsaParamTest {
 protected:
  void SetUp() override {
    // amx runs on the CPU's tiles where it has them, else on the emulated
    // tile unit, which needs AVX-512 VNNI for the rest of the kernels.
    IsaParamTest::SetUp();
    if (IsSkipped()) return;
    if (amx_emulated()) std::printf("[ note     ] AMX tiles emulated: this CPU has none\n");
  }

  // Checks y = x·Wᵀ (and y += x·Wᵀ) for one type and shape.
  void check(WeightType type, Case c, uint32_t seed) {
    SCOPED_TRACE(std::string(weight_type_name(type)) + " m=" + std::to_string(c.m) +
                 " k=" + std::to_string(c.k) + " n=" + std::to_string(c.n));
    const std::vector<uint8_t> w = random_rows(type, c.m, c.k, seed);
    std::vector<float> wf(size_t(c.m) * c.k);
    for (int32_t r = 0; r < c.m; ++r)
      dequantize_row(type, w.data() + r * row_bytes(type, c.k), c.k, wf.data() + size_t(r) * c.k);
    std::mt19937 rng(seed + 1);
    std::normal_distribution<float> normal;
    std::vector<float> x(size_t(c.n) * c.k);
    for (float& v : x) v = normal(rng);
    // BF16 weights on AMX tiles take x rounded to bf16 (every batch size).
    const bool bf16_x = type == WeightType::bf16 && GetParam() == Isa::amx;
    const std::vector<float> xq = bf16_x ? as_bf16(x) : as_quantized(type, x, c.k);

    std::vector<uint8_t> packed(packed_weight_bytes(type, c.m, c.k));
    pack_weights(type, w.data(), c.m, c.k, packed.data());
    QuantScratch scratch;
    const int64_t ldy = c.m + 3;
    std::vector<float> y(size_t(c.n) * ldy, 7.0f);
    matmul_weights(type, x.data(), c.k, c.n, packed.data(), c.m, c.k, y.data(), ldy, false, scratch);
    std::vector<float> y2(size_t(c.n) * ldy, 1.5f);
    matmul_weights(type, x.data(), c.k, c.n, packed.data(), c.m, c.k, y2.data(), ldy, true, scratch);
    // The packed weights hold the file's numbers exactly: what is left is
    // float rounding in the sums.
    const double tol = 2e-6;
    for (int32_t i = 0; i < c.n; ++i)
      for (int32_t j = 0; j < c.m; ++j) {
        double ref = 0, l1 = 0;
        for (int32_t t = 0; t < c.k; ++t) {
          const double p = double(xq[size_t(i) * c.k + t]) * wf[size_t(j) * c.k + t];
          ref += p;
          l1 += std::abs(p);
        }
        ASSERT_NEAR(y[size_t(i) * ldy + j], ref, tol * l1 + 1e-6) << i << "," << j;
        ASSERT_NEAR(y2[size_t(i) * ldy + j], ref + 1.5, tol * l1 + 1e-5) << i << "," << j;
      }
    for (int32_t i = 0; i < c.n; ++i)  // columns past m untouched
      for (int64_t j = c.m; j < ldy; ++j) ASSERT_EQ(y[size_t(i) * ldy + j], 7.0f);
  }
};

TEST_P(QuantMatmul, MatchesScalarReferenceForEveryTypeShapeAndBatch) {
  uint32_t seed = 1;
  for (WeightType type : kTypes) {
    const int32_t kq = quant_k_multiple(type);
    for (Case c : {Case{16, kq, 1}, Case{40, 2 * kq, 3}, Case{33, kq * 3, 8}, Case{64, kq, 17},
                   Case{7, 2 * kq, 64}, Case{96, kq, 33}, Case{48, 2 * kq, 16},
                   Case{17, kq, 256}})
      check(type, c, seed++);
  }
}

TEST_P(QuantMatmul, SwigluMatchesGateAndUpProducts) {
  uint32_t seed = 100;
  for (WeightType type : kTypes) {
    const int32_t k = quant_k_multiple(type) * 2, hidden = 40;
    for (int32_t n : {1, 5, 12, 37}) {
      SCOPED_TRACE(std::string(weight_type_name(type)) + " n=" + std::to_string(n));
      const std::vector<uint8_t> gate = random_rows(type, hidden, k, seed++);
      const std::vector<uint8_t> up = random_rows(type, hidden, k, seed++);
      std::vector<float> x(size_t(n) * k);
      std::mt19937 rng(seed++);
      std::normal_distribution<float> normal;
      for (float& v : x) v = normal(rng);
      QuantScratch scratch;
      std::vector<uint8_t> pg(packed_weight_bytes(type, hidden, k)), pu(pg.size());
      pack_weights(type, gate.data(), hidden, k, pg.data());
      pack_weights(type, up.data(), hidden, k, pu.data());
      std::vector<float> g(size_t(n) * hidden), u(g.size()), y(g.size());
      matmul_weights(type, x.data(), k, n, pg.data(), hidden, k, g.data(), hidden, false, scratch);
      matmul_weights(type, x.data(), k, n, pu.data(), hidden, k, u.data(), hidden, false, scratch);
      std::vector<uint8_t> pgu(packed_gate_up_bytes(type, hidden, k));
      pack_gate_up_weights(type, gate.data(), up.data(), hidden, k, pgu.data());
      matmul_weights_swiglu(type, x.data(), k, n, pgu.data(), hidden, k, y.data(), hidden, scratch);
      for (size_t i = 0; i < y.size(); ++i) {
        const double want = g[i] / (1.0 + std::exp(-double(g[i]))) * u[i];
        ASSERT_NEAR(y[i], want, 1e-4 * (1 + std::abs(want))) << i;
      }
    }
  }
}

// Matrices stacked into one product (the CPU transformer's wq with wk, say)
// give each part's rows the bits of its own product: panels of 16 rows are
// computed alone, whatever their neighbours and the threads' split.
TEST_P(QuantMatmul, StackedMatricesGiveEachPartsRowsBitForBit) {
  uint32_t seed = 300;
  for (WeightType type : kTypes) {
    const int32_t k = quant_k_multiple(type) * 2, m1 = 80, m2 = 48;  // 5 and 3 panels
    const std::vector<uint8_t> a = random_rows(type, m1, k, seed++), b = random_rows(type, m2, k, seed++);
    std::vector<uint8_t> both = a;
    both.insert(both.end(), b.begin(), b.end());
    for (int32_t n : {1, 4, 16, 37}) {
      SCOPED_TRACE(std::string(weight_type_name(type)) + " n=" + std::to_string(n));
      std::vector<float> x(size_t(n) * k);
      std::mt19937 rng(seed++);
      std::normal_distribution<float> normal;
      for (float& v : x) v = normal(rng);
      QuantScratch scratch;
      auto product = [&](const std::vector<uint8_t>& w, int32_t m) {
        std::vector<uint8_t> packed(packed_weight_bytes(type, m, k));
        pack_weights(type, w.data(), m, k, packed.data());
        std::vector<float> y(size_t(n) * m);
        matmul_weights(type, x.data(), k, n, packed.data(), m, k, y.data(), m, false, scratch);
        return y;
      };
      const std::vector<float> ya = product(a, m1), yb = product(b, m2), y = product(both, m1 + m2);
      for (int32_t r = 0; r < n; ++r) {
        ASSERT_EQ(0, std::memcmp(&y[size_t(r) * (m1 + m2)], &ya[size_t(r) * m1], sizeof(float) * m1)) << r;
        ASSERT_EQ(0, std::memcmp(&y[size_t(r) * (m1 + m2) + m1], &yb[size_t(r) * m2], sizeof(float) * m2)) << r;
      }
    }
  }
}

// x's quantization (vectorized per instruction set) keeps the scalar rules:
// a NaN never sets a block's scale and quantizes to 0, so a row with NaNs
// gives what the same row with zeros there gives; a block of subnormals
// (127 / max|x| overflows) quantizes to ±127 and still gives finite results.
TEST_P(QuantMatmul, NaNsInXActAsZerosAndSubnormalBlocksStayFinite) {
  for (WeightType type : {WeightType::q8_0, WeightType::q4_k, WeightType::q6_k}) {
    SCOPED_TRACE(weight_type_name(type));
    const int32_t k = quant_k_multiple(type), m = 32;
    for (int32_t n : {1, 16}) {
      const std::vector<uint8_t> w = random_rows(type, m, k, 7);
      std::vector<uint8_t> packed(packed_weight_bytes(type, m, k));
      pack_weights(type, w.data(), m, k, packed.data());
      std::mt19937 rng(11);
      std::normal_distribution<float> normal;
      std::vector<float> x(size_t(n) * k), zeroed;
      for (float& v : x) v = normal(rng);
      for (size_t i = 3; i < x.size(); i += 37) x[i] = 0;
      zeroed = x;
      for (size_t i = 3; i < x.size(); i += 37) x[i] = std::nanf("");
      for (int32_t j = 0; j < 32; ++j) x[size_t(k) - 32 + j] = zeroed[size_t(k) - 32 + j] = 1e-40f * float(j - 16);
      QuantScratch scratch;
      std::vector<float> y(size_t(n) * m), want(y.size());
      matmul_weights(type, x.data(), k, n, packed.data(), m, k, y.data(), m, false, scratch);
      matmul_weights(type, zeroed.data(), k, n, packed.data(), m, k, want.data(), m, false, scratch);
      for (size_t i = 0; i < y.size(); ++i) {
        ASSERT_TRUE(std::isfinite(y[i])) << i;
        ASSERT_EQ(y[i], want[i]) << i;
      }
    }
  }
}

TEST(QuantPacking, UnpackRowGivesTheDecodedRow) {
  for (WeightType type : kTypes) {
    const int32_t k = quant_k_multiple(type) * 2, m = 21;
    const std::vector<uint8_t> w = random_rows(type, m, k, 7);
    std::vector<uint8_t> packed(packed_weight_bytes(type, m, k));
    pack_weights(type, w.data(), m, k, packed.data());
    std::vector<float> want(static_cast<size_t>(k)), got(static_cast<size_t>(k));
    for (int32_t r : {0, 5, 16, 20}) {
      dequantize_row(type, w.data() + r * row_bytes(type, k), k, want.data());
      unpack_weight_row(type, packed.data(), k, r, got.data());
      // The file's numbers, decoded by the same formula as ggml's (up to a
      // multiply-add the compiler may contract in one of the two).
      float amax = 0;
      for (float v : want) amax = std::max(amax, std::abs(v));
      for (int32_t c = 0; c < k; ++c)
        ASSERT_NEAR(got[c], want[c], 1e-7 * amax)
            << weight_type_name(type) << " row " << r << " col " << c;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Isas, QuantMatmul, ::testing::Values(Isa::avx2, Isa::avxvnni, Isa::avx512, Isa::amx),
                         [](const auto& info) { return testing::isa_test_name(info.param); });

}  // namespace
}  // namespace conveyor::kernels
