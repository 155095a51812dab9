#include "kernels/cpu/paged_attention.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/cpu/simd.hpp"

namespace conveyor::kernels {

namespace {

// Query tokens per work item: a prefill chunk is split so both threads get
// work, while its keys stay in cache across the tile's tokens.
constexpr int32_t kTokenTile = 16;
// Work items wanted per thread, so dynamic scheduling can balance uneven spans.
constexpr int32_t kItemsPerThread = 8;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

struct SequenceView {
  int32_t first_token, n_tokens, start_pos;
  const int32_t* table;
};

SequenceView sequence(const SpanTable& spans, int32_t s) {
  return {spans.token_begin[s], spans.token_begin[s + 1] - spans.token_begin[s],
          spans.start_pos[s], spans.block_tables + spans.table_begin[s]};
}

// The kv heads [head_begin, head_end) of one query token, and its query heads
// (`group` per kv head), as one attention problem over positions [0, n_ctx).
struct TokenHeads {
  const float* q;  // [n_query_heads][head_dim], the first of them
  float* out;      // [n_query_heads][head_dim]
  int32_t head_begin, head_end, group, n_ctx;
};

// Online-softmax state, per query head of a TokenHeads: the running max, the
// running sum of exponentials, the unnormalized output, and one block's scores.
struct SoftmaxState {
  float* max;     // [n_query_heads]
  float* sum;     // [n_query_heads]
  float* acc;     // [n_query_heads][head_dim]
  float* scores;  // [n_query_heads][block_size rounded up to 16]

  static size_t floats(int32_t n_query_heads, int32_t head_dim, int32_t block_size) {
    const size_t bs16 = size_t(block_size + 15) / 16 * 16;
    return size_t(n_query_heads) * (2 + head_dim + bs16);
  }
  static SoftmaxState at(float* p, int32_t n_query_heads, int32_t head_dim) {
    return {p, p + n_query_heads, p + 2 * n_query_heads,
            p + 2 * n_query_heads + int64_t(n_query_heads) * head_dim};
  }
};

inline float dot(const float* a, const float* b, int32_t n) {
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int32_t i = 0; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

// Any head_dim, plain loops.
void attend_generic(const TokenHeads& t, const SequenceView& seq, const PagedKvView& kv,
                    float scale, const SoftmaxState& st) {
  const int32_t bs = kv.block_size, hd = kv.head_dim, bs16 = (bs + 15) / 16 * 16;
  const int32_t n_q = (t.head_end - t.head_begin) * t.group;
  std::fill_n(st.max, n_q, kNegInf);
  std::fill_n(st.sum, n_q, 0.0f);
  std::fill_n(st.acc, int64_t(n_q) * hd, 0.0f);
  for (int32_t j = 0, begin = 0; begin < t.n_ctx; ++j, begin += bs) {
    const int32_t n = std::min(bs, t.n_ctx - begin);
    for (int32_t h = t.head_begin; h < t.head_end; ++h) {
      const int64_t base = int64_t(seq.table[j]) * kv.block_stride + int64_t(h) * bs * hd;
      const float* keys = kv.keys + base;
      const float* values = kv.values + base;
      for (int32_t g = 0; g < t.group; ++g) {
        const int32_t qh = (h - t.head_begin) * t.group + g;
        const float* q = t.q + int64_t(qh) * hd;
        float* sc = st.scores + int64_t(qh) * bs16;
        float* acc = st.acc + int64_t(qh) * hd;
        float block_max = kNegInf;
        for (int32_t s = 0; s < n; ++s) {
          sc[s] = dot(q, keys + int64_t(s) * hd, hd) * scale;
          block_max = std::max(block_max, sc[s]);
        }
        if (block_max > st.max[qh]) {
          // Rescale what was summed under the old maximum (nothing, the first time).
          const float correction =
              st.max[qh] == kNegInf ? 0.0f : simd::exp_fast(st.max[qh] - block_max);
          st.sum[qh] *= correction;
          for (int32_t d = 0; d < hd; ++d) acc[d] *= correction;
          st.max[qh] = block_max;
        }
        const float m = st.max[qh];
        float block_sum = 0.0f;
#pragma omp simd reduction(+ : block_sum)
        for (int32_t s = 0; s < n; ++s) {
          sc[s] = simd::exp_fast(sc[s] - m);
          block_sum += sc[s];
        }
        st.sum[qh] += block_sum;
        for (int32_t s = 0; s < n; ++s) {
          const float p = sc[s];
          const float* v = values + int64_t(s) * hd;
#pragma omp simd
          for (int32_t d = 0; d < hd; ++d) acc[d] += p * v[d];
        }
      }
    }
  }
  for (int32_t qh = 0; qh < n_q; ++qh) {
    const float inv = 1.0f / st.sum[qh];
    for (int32_t d = 0; d < hd; ++d) t.out[int64_t(qh) * hd + d] = st.acc[int64_t(qh) * hd + d] * inv;
  }
}

// head_dim = 16·V: a head's query and output accumulator live in V vector
// registers, and scores are reduced and exponentiated 16 at a time.
//
// Blocks sit anywhere in the pool, so the hardware prefetchers cannot run
// ahead from one block to the next: while block j is computed, its loops pull
// block j + 1's keys and values (for all the item's heads, which are
// contiguous in the block) into L2, slot by slot.
template <int V>
void attend_vec(const TokenHeads& t, const SequenceView& seq, const PagedKvView& kv, float scale,
                const SoftmaxState& st) {
  using simd::f32x16;
  constexpr int32_t hd = 16 * V;
  const int32_t bs = kv.block_size, bs16 = (bs + 15) / 16 * 16;
  const int32_t n_q = (t.head_end - t.head_begin) * t.group;
  f32x16 lane;
  for (int i = 0; i < 16; ++i) lane[i] = float(i);
  std::fill_n(st.max, n_q, kNegInf);
  std::fill_n(st.sum, n_q, 0.0f);
  std::fill_n(st.acc, int64_t(n_q) * hd, 0.0f);
  for (int32_t j = 0, begin = 0; begin < t.n_ctx; ++j, begin += bs) {
    const int32_t n = std::min(bs, t.n_ctx - begin);
    const int64_t block = int64_t(seq.table[j]) * kv.block_stride;
    // With no next block, prefetch this one again (cached, so nearly free).
    const int64_t next_block =
        begin + bs < t.n_ctx ? int64_t(seq.table[j + 1]) * kv.block_stride : block;
    for (int32_t h = t.head_begin; h < t.head_end; ++h) {
      const int64_t head = int64_t(h) * bs * hd;
      const float* keys = kv.keys + block + head;
      const float* values = kv.values + block + head;
      const float* next_keys = kv.keys + next_block + head;
      const float* next_values = kv.values + next_block + head;
      for (int32_t g = 0; g < t.group; ++g) {
        const int32_t qh = (h - t.head_begin) * t.group + g;
        f32x16 qv[V];
        for (int c = 0; c < V; ++c) qv[c] = simd::load(t.q + int64_t(qh) * hd + 16 * c) * scale;
        float* sc = st.scores + int64_t(qh) * bs16;
        for (int32_t s = 0; s < n; ++s) {
          const float* k = keys + int64_t(s) * hd;
          f32x16 a = simd::load(k) * qv[0];
          for (int c = 1; c < V; ++c) a += simd::load(k + 16 * c) * qv[c];
          sc[s] = simd::hsum(a);
          if (g == 0)
            for (int c = 0; c < V; ++c) __builtin_prefetch(next_keys + int64_t(s) * hd + 16 * c, 0, 2);
        }
        f32x16 vmax = f32x16{} + kNegInf;
        for (int32_t c0 = 0; c0 < n; c0 += 16)
          vmax = simd::max16(vmax, lane < float(n - c0) ? simd::load(sc + c0) : vmax);
        const float block_max = simd::hmax(vmax);
        float* acc_mem = st.acc + int64_t(qh) * hd;
        f32x16 acc[V];
        for (int c = 0; c < V; ++c) acc[c] = simd::load(acc_mem + 16 * c);
        if (block_max > st.max[qh]) {
          // Rescale what was summed under the old maximum (nothing, the first time).
          const float correction =
              st.max[qh] == kNegInf ? 0.0f : simd::exp_fast(st.max[qh] - block_max);
          st.sum[qh] *= correction;
          for (int c = 0; c < V; ++c) acc[c] *= correction;
          st.max[qh] = block_max;
        }
        const float m = st.max[qh];
        f32x16 vsum{};
        for (int32_t c0 = 0; c0 < n; c0 += 16) {
          const f32x16 e = simd::exp_fast(simd::load(sc + c0) - m);
          const f32x16 kept = lane < float(n - c0) ? e : f32x16{};
          simd::store(sc + c0, kept);
          vsum += kept;
        }
        st.sum[qh] += simd::hsum(vsum);
        for (int32_t s = 0; s < n; ++s) {
          const float p = sc[s];
          const float* v = values + int64_t(s) * hd;
          for (int c = 0; c < V; ++c) acc[c] += simd::load(v + 16 * c) * p;
          if (g == 0)
            for (int c = 0; c < V; ++c)
              __builtin_prefetch(next_values + int64_t(s) * hd + 16 * c, 0, 2);
        }
        for (int c = 0; c < V; ++c) simd::store(acc_mem + 16 * c, acc[c]);
      }
    }
  }
  for (int32_t qh = 0; qh < n_q; ++qh) {
    const float inv = 1.0f / st.sum[qh];
    for (int c = 0; c < V; ++c)
      simd::store(t.out + int64_t(qh) * hd + 16 * c,
                  simd::load(st.acc + int64_t(qh) * hd + 16 * c) * inv);
  }
}

using AttendFn = void (*)(const TokenHeads&, const SequenceView&, const PagedKvView&, float,
                          const SoftmaxState&);

AttendFn pick_attend(int32_t head_dim) {
  switch (head_dim) {
    case 16: return &attend_vec<1>;
    case 32: return &attend_vec<2>;
    case 48: return &attend_vec<3>;
    case 64: return &attend_vec<4>;
    case 80: return &attend_vec<5>;
    case 96: return &attend_vec<6>;
    case 112: return &attend_vec<7>;
    case 128: return &attend_vec<8>;
    default: return &attend_generic;
  }
}

}  // namespace

void write_kv(const float* k, const float* v, int64_t ld, const SpanTable& spans,
              const PagedKvView& kv) {
  const int32_t bs = kv.block_size, hd = kv.head_dim;
  for (int32_t s = 0; s < spans.n_seqs; ++s) {
    const SequenceView seq = sequence(spans, s);
    for (int32_t i = 0; i < seq.n_tokens; ++i) {
      const int32_t pos = seq.start_pos + i, t = seq.first_token + i;
      const int64_t slot = int64_t(seq.table[pos / bs]) * kv.block_stride + (pos % bs) * hd;
      for (int32_t h = 0; h < kv.n_kv_heads; ++h) {
        const int64_t dst = slot + int64_t(h) * bs * hd;
        std::memcpy(kv.keys + dst, k + t * ld + int64_t(h) * hd, sizeof(float) * size_t(hd));
        std::memcpy(kv.values + dst, v + t * ld + int64_t(h) * hd, sizeof(float) * size_t(hd));
      }
    }
  }
}

void paged_attention(const float* q, int64_t ldq, int32_t n_heads, const SpanTable& spans,
                     const PagedKvView& kv, float* out, int64_t ldo,
                     AttentionWorkspace& workspace) {
  const int32_t n_kv = kv.n_kv_heads, group = n_heads / n_kv, hd = kv.head_dim;
  const int max_threads = omp_get_max_threads();
  // An item takes a run of kv heads: as many as still leaves every thread
  // kItemsPerThread items, since a block's heads are contiguous and one long
  // read streams better than several short ones.
  int64_t tiles = 0;
  for (int32_t s = 0; s < spans.n_seqs; ++s)
    tiles += (sequence(spans, s).n_tokens + kTokenTile - 1) / kTokenTile;
  const int32_t heads_per_item = int32_t(
      std::clamp<int64_t>(tiles * n_kv / (int64_t(kItemsPerThread) * max_threads), 1, n_kv));
  std::vector<int32_t>& items = workspace.items;
  items.clear();
  for (int32_t s = 0; s < spans.n_seqs; ++s) {
    const SequenceView seq = sequence(spans, s);
    for (int32_t h = 0; h < n_kv; h += heads_per_item)
      for (int32_t i = 0; i < seq.n_tokens; i += kTokenTile) items.insert(items.end(), {s, h, i});
  }
  const int32_t n_items = int32_t(items.size() / 3);
  const size_t per_thread =
      (SoftmaxState::floats(heads_per_item * group, hd, kv.block_size) + 15) / 16 * 16;
  if (workspace.scratch.size() < per_thread * max_threads)
    workspace.scratch.resize(per_thread * max_threads);
  const float scale = 1.0f / std::sqrt(float(hd));
  const AttendFn attend = pick_attend(hd);

#pragma omp parallel if (n_items > 1)
  {
    const SoftmaxState state = SoftmaxState::at(
        workspace.scratch.data() + per_thread * omp_get_thread_num(), heads_per_item * group, hd);
#pragma omp for schedule(dynamic, 2)
    for (int32_t item = 0; item < n_items; ++item) {
      const int32_t s = items[3 * item], h0 = items[3 * item + 1], first = items[3 * item + 2];
      const int32_t h1 = std::min(n_kv, h0 + heads_per_item);
      const SequenceView seq = sequence(spans, s);
      const int32_t last = std::min(seq.n_tokens, first + kTokenTile);
      for (int32_t i = first; i < last; ++i) {
        const int64_t t = seq.first_token + i;
        const int64_t col = int64_t(h0) * group * hd;
        attend({q + t * ldq + col, out + t * ldo + col, h0, h1, group, seq.start_pos + i + 1}, seq,
               kv, scale, state);
      }
    }
  }
}

}  // namespace conveyor::kernels
