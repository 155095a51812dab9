#include "kernels/cpu/paged_attention.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <tuple>

#include "tests/kernels/cpu/isa_param.hpp"
#include "tests/kernels/cpu/random.hpp"

namespace conveyor::kernels {
namespace {

constexpr KvDtype kAllDtypes[] = {KvDtype::f32, KvDtype::f16, KvDtype::bf16, KvDtype::q8_0};

// A row of n values as the cache of `dtype` holds them. For f16 and bf16 that
// is each value rounded by kv_dtype.hpp's scalar conversions (which
// kv_dtype_test checks kv_store against); q8_0 rounds a block of 32 at once.
std::vector<float> rounded_row(KvDtype dtype, const float* x, int32_t n) {
  std::vector<float> out(x, x + n);
  switch (dtype) {
    case KvDtype::f16:
      for (float& v : out) v = kv_half::f16_to_f32(kv_half::f32_to_f16(v));
      break;
    case KvDtype::bf16:
      for (float& v : out) v = kv_half::bf16_to_f32(kv_half::f32_to_bf16(v));
      break;
    case KvDtype::q8_0: {
      std::vector<std::byte> q(kv_bytes(dtype, n));
      kv_store(dtype, x, q.data(), n);
      kv_load(dtype, q.data(), out.data(), n);
      break;
    }
    default: break;
  }
  return out;
}

// A batch of sequence spans over a block pool, with every sequence's keys and
// values for all its positions kept densely as the reference.
struct Fixture {
  int32_t n_heads = 0, n_kv_heads = 0, head_dim = 0, block_size = 0, n_layers = 2, layer = 1;
  KvDtype dtype = KvDtype::f32;
  std::vector<int32_t> start_pos, span_len;  // per sequence
  std::vector<int32_t> tile_until;           // per sequence, or empty (SpanTable::tile_until)
  std::vector<int32_t> token_begin{0}, block_tables, table_begin{0};
  std::vector<std::byte> pool;                 // [n_blocks][n_layers][2][n_kv][bs][hd] of dtype
  std::vector<std::vector<float>> dense_k, dense_v;  // per sequence [pos][n_kv][hd]
  int64_t block_stride = 0;                    // elements

  size_t bytes(int64_t elems) const { return kv_bytes(dtype, elems); }
  PagedKvView view() {
    const int64_t layer_bytes = int64_t(bytes(int64_t(n_kv_heads) * block_size * head_dim));
    return {pool.data() + layer * 2 * layer_bytes, pool.data() + (layer * 2 + 1) * layer_bytes,
            block_stride, n_kv_heads, block_size, head_dim, dtype};
  }
  SpanTable spans() const {
    return {int32_t(start_pos.size()), token_begin.data(),
            start_pos.data(),          block_tables.data(),
            table_begin.data(),        tile_until.empty() ? nullptr : tile_until.data()};
  }
  int32_t n_tokens() const { return token_begin.back(); }
  int32_t kv_width() const { return n_kv_heads * head_dim; }

  void build(uint32_t seed) {
    std::mt19937 rng(seed);
    int32_t n_blocks = 0;
    std::vector<int32_t> blocks_needed;
    for (size_t s = 0; s < start_pos.size(); ++s) {
      const int32_t total = start_pos[s] + span_len[s];
      blocks_needed.push_back((total + block_size - 1) / block_size);
      n_blocks += blocks_needed.back();
      token_begin.push_back(token_begin.back() + span_len[s]);
    }
    n_blocks += 3;  // unused blocks, so ids are not simply 0..n-1
    std::vector<int32_t> ids(n_blocks);
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), rng);
    size_t next = 0;
    for (int32_t need : blocks_needed) {
      for (int32_t b = 0; b < need; ++b) block_tables.push_back(ids[next++]);
      table_begin.push_back(int32_t(block_tables.size()));
    }
    block_stride = int64_t(n_layers) * 2 * n_kv_heads * block_size * head_dim;
    // Garbage in every slot, so a read of a wrong slot shows.
    const std::vector<float> garbage =
        testing::random_vector(size_t(n_blocks) * block_stride, seed + 1, -9.0f, 9.0f);
    pool.resize(bytes(int64_t(garbage.size())));
    kv_store(dtype, garbage.data(), pool.data(), int64_t(garbage.size()));
    for (size_t s = 0; s < start_pos.size(); ++s) {
      const int32_t total = start_pos[s] + span_len[s];
      dense_k.push_back(testing::random_vector(size_t(total) * kv_width(), seed + 2 + 2 * s));
      dense_v.push_back(testing::random_vector(size_t(total) * kv_width(), seed + 3 + 2 * s));
    }
  }

  // Where the cache must hold key (or value) head h at pos: head_dim elements.
  std::byte* slot(int32_t s, int32_t pos, int32_t h, bool value) {
    const int32_t block = block_tables[table_begin[s] + pos / block_size];
    const PagedKvView v = view();
    return static_cast<std::byte*>(value ? v.values : v.keys) +
           bytes(block * block_stride + (int64_t(h) * block_size + pos % block_size) * head_dim);
  }
  // That slot's contents, as floats.
  std::vector<float> read_slot(int32_t s, int32_t pos, int32_t h, bool value) {
    std::vector<float> out(static_cast<size_t>(head_dim));
    kv_load(dtype, slot(s, pos, h, value), out.data(), head_dim);
    return out;
  }

  // Writes the cached prefix [0, start_pos) the way the layout says.
  void fill_prefix() {
    for (size_t s = 0; s < start_pos.size(); ++s)
      for (int32_t p = 0; p < start_pos[s]; ++p)
        for (int32_t h = 0; h < n_kv_heads; ++h) {
          kv_store(dtype, &dense_k[s][(size_t(p) * n_kv_heads + h) * head_dim],
                   slot(int32_t(s), p, h, false), head_dim);
          kv_store(dtype, &dense_v[s][(size_t(p) * n_kv_heads + h) * head_dim],
                   slot(int32_t(s), p, h, true), head_dim);
        }
  }

  // The keys and values as the cache holds them: every row rounded to dtype.
  Fixture rounded_copy() const {
    Fixture r = *this;
    for (auto* dense : {&r.dense_k, &r.dense_v})
      for (auto& seq : *dense)
        for (size_t row = 0; row < seq.size(); row += size_t(head_dim)) {
          const std::vector<float> x = rounded_row(dtype, &seq[row], head_dim);
          std::copy(x.begin(), x.end(), seq.begin() + int64_t(row));
        }
    return r;
  }

  // The span's new keys and values as write_kv receives them: [n_tokens][k | v].
  std::vector<float> span_kv() const {
    std::vector<float> kv(size_t(n_tokens()) * 2 * kv_width());
    for (size_t s = 0; s < start_pos.size(); ++s)
      for (int32_t i = 0; i < span_len[s]; ++i) {
        const size_t t = token_begin[s] + i, pos = start_pos[s] + i;
        std::copy_n(&dense_k[s][pos * kv_width()], kv_width(), &kv[t * 2 * kv_width()]);
        std::copy_n(&dense_v[s][pos * kv_width()], kv_width(),
                    &kv[t * 2 * kv_width() + kv_width()]);
      }
    return kv;
  }
};

Fixture make_fixture(int32_t n_heads, int32_t n_kv_heads, int32_t head_dim, int32_t block_size,
                     std::vector<int32_t> start_pos, std::vector<int32_t> span_len, uint32_t seed,
                     KvDtype dtype = KvDtype::f32) {
  Fixture f;
  f.dtype = dtype;
  f.n_heads = n_heads;
  f.n_kv_heads = n_kv_heads;
  f.head_dim = head_dim;
  f.block_size = block_size;
  f.start_pos = std::move(start_pos);
  f.span_len = std::move(span_len);
  f.build(seed);
  return f;
}

// Every dtype, head sizes with and without a 16-wide vector path and a tail.
// Each on the AVX2 (or the build's own) and the AVX-512 compilation of the
// kernels (paged_attention.inc).
class WriteKv : public testing::IsaParamTest {};
class PagedAttention : public testing::IsaParamTest {};

TEST_P(WriteKv, PutsEachTokenInItsPositionsSlot) {
  for (KvDtype dtype : kAllDtypes)
    for (int32_t head_dim : {8, 32, 20, 96}) {
      if (!kv_dtype_fits(dtype, head_dim)) continue;
      SCOPED_TRACE(std::string(kv_dtype_name(dtype)) + ", head_dim " + std::to_string(head_dim));
      Fixture f = make_fixture(4, 2, head_dim, 4, {0, 5, 3}, {6, 1, 9}, 1, dtype);
      const std::vector<std::byte> pool_before = f.pool;
      const std::vector<float> kv = f.span_kv();
      write_kv(kv.data(), kv.data() + f.kv_width(), 2 * f.kv_width(), f.spans(), f.view());
      size_t written = 0;
      for (int32_t s = 0; s < 3; ++s)
        for (int32_t i = 0; i < f.span_len[s]; ++i) {
          const int32_t pos = f.start_pos[s] + i;
          for (int32_t h = 0; h < f.n_kv_heads; ++h) {
            const std::vector<float> k = f.read_slot(s, pos, h, false), v = f.read_slot(s, pos, h, true);
            const size_t src = (size_t(pos) * f.n_kv_heads + h) * f.head_dim;
            ASSERT_EQ(k, rounded_row(dtype, &f.dense_k[s][src], f.head_dim));
            ASSERT_EQ(v, rounded_row(dtype, &f.dense_v[s][src], f.head_dim));
            written += 2 * size_t(f.head_dim);
          }
        }
      // Nothing else changed: at most the written elements (q8_0: bytes)
      // differ from before (fewer only where a new value rounds to the
      // garbage that was there).
      size_t changed = 0;
      const size_t unit = dtype == KvDtype::q8_0 ? 1 : f.bytes(1);
      written = f.bytes(int64_t(written)) / unit;
      for (size_t i = 0; i < f.pool.size(); i += unit)
        changed += std::memcmp(&f.pool[i], &pool_before[i], unit) != 0;
      EXPECT_LE(changed, written);
      EXPECT_GE(changed, written * 98 / 100);
    }
}

// Dense causal attention of one sequence's span, in double.
std::vector<float> naive_attention(const Fixture& f, int32_t s, const std::vector<float>& q,
                                   int64_t ldq) {
  const int32_t group = f.n_heads / f.n_kv_heads, hd = f.head_dim;
  std::vector<float> out(size_t(f.span_len[s]) * f.n_heads * hd);
  for (int32_t i = 0; i < f.span_len[s]; ++i) {
    const int32_t pos = f.start_pos[s] + i;
    const float* qt = q.data() + (f.token_begin[s] + i) * ldq;
    for (int32_t h = 0; h < f.n_heads; ++h) {
      const int32_t kvh = h / group;
      std::vector<double> score(pos + 1);
      for (int32_t p = 0; p <= pos; ++p) {
        double dot = 0.0;
        for (int32_t d = 0; d < hd; ++d)
          dot += double(qt[h * hd + d]) * f.dense_k[s][(size_t(p) * f.n_kv_heads + kvh) * hd + d];
        score[p] = dot / std::sqrt(double(hd));
      }
      const double mx = *std::max_element(score.begin(), score.end());
      double sum = 0.0;
      for (double& x : score) sum += (x = std::exp(x - mx));
      for (int32_t d = 0; d < hd; ++d) {
        double o = 0.0;
        for (int32_t p = 0; p <= pos; ++p)
          o += score[p] * f.dense_v[s][(size_t(p) * f.n_kv_heads + kvh) * hd + d];
        out[(size_t(i) * f.n_heads + h) * hd + d] = float(o / sum);
      }
    }
  }
  return out;
}

// The kernel's output `out` against naive attention over the cache's values
// with the queries it multiplied (`q_as_run`: float tolerance), and over the
// exact values with the given queries (returned: the worst relative error).
double compare_attention(const Fixture& f, const Fixture& as_cached, const std::vector<float>& q_as_run,
                         const std::vector<float>& q, int64_t ldq, const std::vector<float>& out, int64_t ldo) {
  double worst_exact = 0.0;
  for (int32_t s = 0; s < int32_t(f.start_pos.size()); ++s) {
    const std::vector<float> ref = naive_attention(as_cached, s, q_as_run, ldq);
    const std::vector<float> exact = naive_attention(f, s, q, ldq);
    for (int32_t i = 0; i < f.span_len[s]; ++i) {
      const float* got = out.data() + (f.token_begin[s] + i) * ldo;
      const size_t n = size_t(f.n_heads) * f.head_dim;
      EXPECT_LT(testing::relative_error(got, ref.data() + size_t(i) * n, n), 1e-5)
          << "sequence " << s << " token " << i;
      worst_exact = std::max(worst_exact, testing::relative_error(got, exact.data() + size_t(i) * n, n));
    }
  }
  return worst_exact;
}

// One token's queries (n_heads heads of head_dim) as Q8Queries rounds them,
// back in float and divided by the scale.
void round_q8_queries(float* q, int32_t n_heads, int32_t head_dim, float scale) {
  for (int32_t h = 0; h < n_heads; ++h) {
    float* x = q + size_t(h) * size_t(head_dim);
    float amax = 0.0f;
    for (int32_t i = 0; i < head_dim; ++i) amax = std::max(amax, std::fabs(x[i] * scale));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    for (int32_t i = 0; i < head_dim; ++i) x[i] = std::nearbyint(x[i] * scale * id) * d / scale;
  }
}

// The queries as the kernel multiplies them where it takes dot products
// (attention_takes_dot_products): times the scale, rounded to the keys' type
// (bf16 each; q8_0 to int8 with one scale a head, d = max|x| / 127, nearest
// even of x · (1/d)), and divided by the scale again for naive_attention.
std::vector<float> as_rounded_queries(const Fixture& f, std::vector<float> q, int64_t ldq) {
  const float scale = 1.0f / std::sqrt(float(f.head_dim));
  if (f.dtype == KvDtype::bf16) {
    for (float& x : q) x = kv_half::bf16_to_f32(kv_half::f32_to_bf16(x * scale)) / scale;
    return q;
  }
  for (int32_t s = 0; s < int32_t(f.start_pos.size()); ++s)
    for (int32_t i = 0; i < f.span_len[s]; ++i) {
      const size_t row = size_t(f.token_begin[s] + i) * size_t(ldq);
      round_q8_queries(q.data() + row, f.n_heads, f.head_dim, scale);
    }
  return q;
}

// Attention over `f` against the naive version of its values rounded to the
// dtype (the arithmetic: float tolerance) and of the exact values (the
// dtype's own error: below `dtype_tolerance`). Returns that error. Where the
// CPU has dot products for the cache's type (AVX512-BF16 for bf16,
// AVX512-VNNI for q8_0) and the AVX-512 kernels run, it is checked with them
// and without them.
double check_attention(Fixture& f, uint32_t seed, double dtype_tolerance = 0.0) {
  SCOPED_TRACE(kv_dtype_name(f.dtype));
  f.fill_prefix();
  const std::vector<float> kv = f.span_kv();
  write_kv(kv.data(), kv.data() + f.kv_width(), 2 * f.kv_width(), f.spans(), f.view());
  const int64_t ldq = int64_t(f.n_heads) * f.head_dim + 3;
  // Large queries make the softmax peaked, which tests the running maximum.
  const std::vector<float> q = testing::random_vector(size_t(f.n_tokens()) * ldq, seed, -4, 4);
  const int64_t ldo = ldq + 1;
  const Fixture as_cached = f.rounded_copy();
  double worst_exact = 0.0;
  const bool both = attention_dot_products(f.dtype);
  for (const bool dot : {false, true}) {
    if (dot && !both) break;
    SCOPED_TRACE(dot ? "dot-product scores" : "keys widened to float");
    const bool was = attention_dot_products(f.dtype);
    if (both) set_attention_dot_products(dot);
    std::vector<float> out(size_t(f.n_tokens()) * ldo, 0.0f);
    AttentionWorkspace ws;
    paged_attention(q.data(), ldq, f.n_heads, f.spans(), f.view(), out.data(), ldo, ws);
    const bool rounded = attention_takes_dot_products(f.view(), f.n_heads, ws);
    if (both) set_attention_dot_products(was);
    const std::vector<float> q_as_run = rounded ? as_rounded_queries(f, q, ldq) : q;
    worst_exact = std::max(worst_exact, compare_attention(f, as_cached, q_as_run, q, ldq, out, ldo));
  }
  if (f.dtype == KvDtype::f32) return 0.0;
  // Rounding the cache is all the difference from exact values, and it is small.
  EXPECT_LT(worst_exact, dtype_tolerance);
  return worst_exact;
}

// Bound on the error against exact keys and values (relative to the output's
// scale) that rounding the cache brings: about 4x the worst measured over
// these tests (f16 7.9e-4, bf16 5.2e-3: a 10-bit and a 7-bit mantissa;
// q8_0 1.3e-2: 8 bits against the block's largest value).
double dtype_tolerance(KvDtype dtype) {
  switch (dtype) {
    case KvDtype::bf16: return 2e-2;
    case KvDtype::q8_0: return 5e-2;
    default: return 3e-3;
  }
}

// Keeps the worst error of each dtype, recorded as a test property.
struct WorstError {
  double by_dtype[4] = {0, 0, 0, 0};
  void add(KvDtype d, double e) { by_dtype[int(d)] = std::max(by_dtype[int(d)], e); }
  ~WorstError() {
    for (KvDtype d : {KvDtype::f16, KvDtype::bf16, KvDtype::q8_0})
      ::testing::Test::RecordProperty(std::string("worst_error_") + kv_dtype_name(d),
                                      std::to_string(by_dtype[int(d)]));
  }
};

TEST_P(PagedAttention, DecodeAndPrefillSpansMatchDenseAttention) {
  WorstError worst;
  for (KvDtype dtype : kAllDtypes) {
    uint32_t seed = 100;
    for (int32_t block_size : {1, 4, 16})
      for (auto [heads, kv_heads] : {std::pair{4, 4}, std::pair{8, 2}, std::pair{6, 1}}) {
        // Decode tokens after long contexts, a fresh prompt, a prefill chunk that
        // continues a cached prefix, and a span longer than one token tile.
        const int32_t head_dim = dtype == KvDtype::q8_0 ? 32 : 16;  // q8_0: one block per row
        Fixture f = make_fixture(heads, kv_heads, head_dim, block_size, {40, 0, 0, 23, 7, 100},
                                 {1, 13, 1, 9, 40, 1}, ++seed, dtype);
        worst.add(dtype, check_attention(f, ++seed, dtype_tolerance(dtype)));
      }
  }
}

// The vector path for every head size it has (16·V, V = 1..8), in each dtype.
TEST_P(PagedAttention, EveryVectorHeadSize) {
  WorstError worst;
  for (KvDtype dtype : kAllDtypes)
    for (int32_t head_dim = 16; head_dim <= 128; head_dim += 16) {
      if (!kv_dtype_fits(dtype, head_dim)) continue;
      SCOPED_TRACE("head_dim " + std::to_string(head_dim));
      Fixture f = make_fixture(4, 2, head_dim, 16, {30, 0}, {1, 20}, uint32_t(head_dim), dtype);
      worst.add(dtype, check_attention(f, uint32_t(head_dim) + 1, dtype_tolerance(dtype)));
    }
}

// Grouped-query attention where a tile of query heads shares each widened
// key and value row (kGroupTile: 8 heads for head sizes up to 32, 4 up to 64,
// else 2; dot-product scores 8 heads of 64 for q8_0, 4 of 128), with groups
// that are whole tiles, tiles and a remainder, and smaller than one tile (and
// than kChunkMinGroup: a block at a time, the dot-product scores' queries
// rounded once a head).
TEST_P(PagedAttention, QueryHeadTilesOfEveryGroupSize) {
  WorstError worst;
  uint32_t seed = 500;
  for (KvDtype dtype : kAllDtypes)
    for (auto [heads, kv_heads, head_dim] :
         {std::tuple{32, 4, 64}, std::tuple{20, 2, 32}, std::tuple{12, 2, 32}, std::tuple{6, 2, 128},
          std::tuple{10, 1, 16}, std::tuple{9, 1, 64}, std::tuple{24, 2, 64}, std::tuple{14, 2, 128},
          std::tuple{4, 4, 128}, std::tuple{8, 4, 64}}) {
      if (!kv_dtype_fits(dtype, head_dim)) continue;
      SCOPED_TRACE(std::to_string(heads) + "/" + std::to_string(kv_heads) + " heads of " + std::to_string(head_dim));
      Fixture f = make_fixture(heads, kv_heads, head_dim, 16, {37, 0, 5}, {1, 18, 3}, ++seed, dtype);
      worst.add(dtype, check_attention(f, ++seed, dtype_tolerance(dtype)));
    }
}

// Spans long enough for the tile kernel (paged_attention_tile.inc: two
// tokens and more, 16 rows and more of tokens × query heads a kv head),
// beside decode tokens in the same call: rows that fill the item and leave
// remainders, chunks of positions that the causal mask cuts in every place
// (block sizes from 1 to 64, so chunks of 16 to 64 positions), a span that
// continues a cached prefix and one that starts fresh, and two-token spans
// (a speculative verify step's size).
TEST_P(PagedAttention, PrefillTilesMatchDenseAttention) {
  WorstError worst;
  uint32_t seed = 900;
  for (KvDtype dtype : kAllDtypes)
    for (auto [heads, kv_heads, head_dim] : {std::tuple{32, 4, 64}, std::tuple{12, 12, 64}, std::tuple{6, 2, 128},
                                             std::tuple{10, 1, 16}, std::tuple{9, 3, 48}, std::tuple{16, 2, 32}})
      for (int32_t block_size : {1, 16, 64}) {
        if (!kv_dtype_fits(dtype, head_dim)) continue;
        SCOPED_TRACE(std::to_string(heads) + "/" + std::to_string(kv_heads) + " heads of " +
                     std::to_string(head_dim) + ", blocks of " + std::to_string(block_size));
        Fixture f = make_fixture(heads, kv_heads, head_dim, block_size, {21, 0, 90, 5, 70}, {40, 70, 1, 2, 9},
                                 ++seed, dtype);
        // Prompt chunks (the first a whole one, the second's last 20
        // tokens generated, two tokens of a prompt), a decode token and a
        // verify step of 4 drafts after a prompt's last token.
        f.tile_until = {61, 50, 0, 7, 71};
        worst.add(dtype, check_attention(f, ++seed, dtype_tolerance(dtype)));
      }
}

// What makes recomputed, verified and decoded positions agree, and a prompt
// the same however it is chunked: every token's output is bit for bit what
// a call with that token alone (a decode step; a prompt chunk of one token)
// gives, tiles or not.
TEST_P(PagedAttention, EachTokenAsAloneBitForBit) {
  uint32_t seed = 1300;
  for (KvDtype dtype : kAllDtypes)
    for (auto [heads, kv_heads, head_dim] : {std::tuple{32, 4, 64}, std::tuple{12, 12, 64}, std::tuple{10, 1, 16},
                                             std::tuple{9, 3, 48}})
      for (int32_t block_size : {1, 16}) {
        if (!kv_dtype_fits(dtype, head_dim)) continue;
        SCOPED_TRACE(std::string(kv_dtype_name(dtype)) + ", " + std::to_string(heads) + "/" +
                     std::to_string(kv_heads) + " heads of " + std::to_string(head_dim) + ", blocks of " +
                     std::to_string(block_size));
        Fixture f = make_fixture(heads, kv_heads, head_dim, block_size, {0, 33, 7}, {45, 12, 1}, ++seed, dtype);
        f.tile_until = {45, 40, 0};
        f.fill_prefix();
        const std::vector<float> kv = f.span_kv();
        write_kv(kv.data(), kv.data() + f.kv_width(), 2 * f.kv_width(), f.spans(), f.view());
        const int64_t ld = int64_t(heads) * head_dim;
        const std::vector<float> q = testing::random_vector(size_t(f.n_tokens()) * ld, ++seed, -4, 4);
        std::vector<float> out(q.size()), alone(static_cast<size_t>(ld));
        AttentionWorkspace ws;
        paged_attention(q.data(), ld, heads, f.spans(), f.view(), out.data(), ld, ws);
        for (int32_t s = 0; s < 3; ++s)
          for (int32_t i = 0; i < f.span_len[s]; ++i) {
            const int32_t token_begin[] = {0, 1}, start[] = {f.start_pos[s] + i},
                          tables[] = {0, f.table_begin[s + 1] - f.table_begin[s]}, until[] = {f.tile_until[s]};
            const SpanTable one{1, token_begin, start, f.block_tables.data() + f.table_begin[s], tables, until};
            const int64_t t = f.token_begin[s] + i;
            paged_attention(q.data() + t * ld, ld, heads, one, f.view(), alone.data(), ld, ws);
            ASSERT_EQ(std::vector<float>(out.begin() + t * ld, out.begin() + (t + 1) * ld), alone)
                << "sequence " << s << " token " << i;
          }
      }
}

// The generic path (a head size with no vector path), many sequences.
TEST_P(PagedAttention, OddHeadDimAndManySequences) {
  std::vector<int32_t> start, len;
  for (int i = 0; i < 40; ++i) {
    start.push_back((i * 37) % 70);
    len.push_back(i % 5 == 0 ? 1 + i % 11 : 1);
  }
  WorstError worst;
  for (KvDtype dtype : kAllDtypes) {
    // q8_0 needs whole blocks of 32: 160 has no vector path either.
    Fixture f = make_fixture(6, 3, dtype == KvDtype::q8_0 ? 160 : 12, 16, start, len, 7, dtype);
    worst.add(dtype, check_attention(f, 8, dtype_tolerance(dtype)));
  }
}

TEST_P(PagedAttention, WorkspaceIsReusedAcrossCalls) {
  Fixture big = make_fixture(4, 2, 8, 4, {10, 0}, {5, 30}, 3);
  Fixture small = make_fixture(4, 2, 8, 4, {3}, {1}, 4);
  big.fill_prefix();
  small.fill_prefix();
  AttentionWorkspace ws;
  std::vector<float> q(size_t(35) * 32, 0.5f), out(size_t(35) * 32);
  paged_attention(q.data(), 32, 4, big.spans(), big.view(), out.data(), 32, ws);
  const float* scratch = ws.scratch.data();
  const size_t capacity = ws.items.capacity();
  paged_attention(q.data(), 32, 4, small.spans(), small.view(), out.data(), 32, ws);
  EXPECT_EQ(ws.scratch.data(), scratch);
  EXPECT_EQ(ws.items.capacity(), capacity);
}

CONVEYOR_INSTANTIATE_ISAS(WriteKv);
CONVEYOR_INSTANTIATE_ISAS(PagedAttention);

}  // namespace
}  // namespace conveyor::kernels
