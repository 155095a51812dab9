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

struct SequenceView {
  int32_t first_token, n_tokens, start_pos;
  const int32_t* table;
};

SequenceView sequence(const SpanTable& spans, int32_t s) {
  return {spans.token_begin[s], spans.token_begin[s + 1] - spans.token_begin[s],
          spans.start_pos[s], spans.block_tables + spans.table_begin[s]};
}

inline float dot(const float* a, const float* b, int32_t n) {
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int32_t i = 0; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

// Online-softmax state of the query heads of one group: per head the running
// max, the running sum of exponentials and the unnormalized output.
struct GroupState {
  float* max;  // [group]
  float* sum;  // [group]
  float* acc;  // [group][head_dim]
};

// Attention of one query token (its `group` query heads) over the positions
// [0, n_ctx) of one kv head. scores: [group][block_size] scratch.
void attend_token(const float* q, int32_t group, const SequenceView& seq, const PagedKvView& kv,
                  int32_t kv_head, int32_t n_ctx, float scale, float* scores,
                  const GroupState& st, float* out) {
  const int32_t bs = kv.block_size, hd = kv.head_dim;
  const int64_t head_offset = int64_t(kv_head) * bs * hd;
  std::fill_n(st.max, group, -std::numeric_limits<float>::infinity());
  std::fill_n(st.sum, group, 0.0f);
  std::fill_n(st.acc, int64_t(group) * hd, 0.0f);
  for (int32_t j = 0, begin = 0; begin < n_ctx; ++j, begin += bs) {
    const int32_t n = std::min(bs, n_ctx - begin);
    const int64_t base = int64_t(seq.table[j]) * kv.block_stride + head_offset;
    const float* keys = kv.keys + base;
    const float* values = kv.values + base;
    for (int32_t g = 0; g < group; ++g) {
      const float* qg = q + int64_t(g) * hd;
      float* sc = scores + int64_t(g) * bs;
      float block_max = -std::numeric_limits<float>::infinity();
      for (int32_t s = 0; s < n; ++s) {
        sc[s] = dot(qg, keys + int64_t(s) * hd, hd) * scale;
        block_max = std::max(block_max, sc[s]);
      }
      float* acc = st.acc + int64_t(g) * hd;
      if (block_max > st.max[g]) {
        // Rescale what was summed under the old maximum (nothing, the first time).
        const float correction = st.max[g] == -std::numeric_limits<float>::infinity()
                                     ? 0.0f
                                     : std::exp(st.max[g] - block_max);
        st.sum[g] *= correction;
#pragma omp simd
        for (int32_t d = 0; d < hd; ++d) acc[d] *= correction;
        st.max[g] = block_max;
      }
      const float m = st.max[g];
      float block_sum = 0.0f;
#pragma omp simd reduction(+ : block_sum)
      for (int32_t s = 0; s < n; ++s) {
        sc[s] = simd::exp_fast(sc[s] - m);
        block_sum += sc[s];
      }
      st.sum[g] += block_sum;
      for (int32_t s = 0; s < n; ++s) {
        const float p = sc[s];
        const float* v = values + int64_t(s) * hd;
#pragma omp simd
        for (int32_t d = 0; d < hd; ++d) acc[d] += p * v[d];
      }
    }
  }
  for (int32_t g = 0; g < group; ++g) {
    const float inv = 1.0f / st.sum[g];
    const float* acc = st.acc + int64_t(g) * hd;
    float* o = out + int64_t(g) * hd;
#pragma omp simd
    for (int32_t d = 0; d < hd; ++d) o[d] = acc[d] * inv;
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
  const int32_t group = n_heads / kv.n_kv_heads;
  const int32_t hd = kv.head_dim;
  std::vector<int32_t>& items = workspace.items;
  items.clear();
  for (int32_t s = 0; s < spans.n_seqs; ++s) {
    const SequenceView seq = sequence(spans, s);
    for (int32_t h = 0; h < kv.n_kv_heads; ++h)
      for (int32_t i = 0; i < seq.n_tokens; i += kTokenTile) items.insert(items.end(), {s, h, i});
  }
  const int32_t n_items = int32_t(items.size() / 3);
  const int max_threads = omp_get_max_threads();
  // Scores, accumulators, maxima and sums; rounded to whole cache lines.
  const size_t per_thread = (size_t(group) * (kv.block_size + hd + 2) + 15) / 16 * 16;
  if (workspace.scratch.size() < per_thread * max_threads)
    workspace.scratch.resize(per_thread * max_threads);
  const float scale = 1.0f / std::sqrt(float(hd));

#pragma omp parallel if (n_items > 1)
  {
    float* scores = workspace.scratch.data() + per_thread * omp_get_thread_num();
    float* acc = scores + int64_t(group) * kv.block_size;
    const GroupState state{acc + int64_t(group) * hd, acc + int64_t(group) * (hd + 1), acc};
#pragma omp for schedule(dynamic, 4)
    for (int32_t item = 0; item < n_items; ++item) {
      const int32_t s = items[3 * item], h = items[3 * item + 1], first = items[3 * item + 2];
      const SequenceView seq = sequence(spans, s);
      const int32_t last = std::min(seq.n_tokens, first + kTokenTile);
      for (int32_t i = first; i < last; ++i) {
        const int64_t t = seq.first_token + i;
        attend_token(q + t * ldq + int64_t(h) * group * hd, group, seq, kv, h,
                     seq.start_pos + i + 1, scale, scores, state,
                     out + t * ldo + int64_t(h) * group * hd);
      }
    }
  }
}

}  // namespace conveyor::kernels
