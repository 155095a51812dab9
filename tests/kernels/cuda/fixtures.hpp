// Random batches for the CUDA kernel tests: a flattened batch of sequence
// spans over a shuffled block pool, the pool filled with garbage (so a read
// of a wrong slot shows), and the emulation of the device kernels' loops on
// the host from the *_math.hpp functions they run. Shared by math_test.cpp
// (host only) and device_test.cpp.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/cpu/paged_attention.hpp"
#include "kernels/cuda/attention_math.hpp"
#include "kernels/cuda/kv_math.hpp"
#include "tests/kernels/cpu/random.hpp"

namespace conveyor::kernels::cuda::testing {

using kernels::testing::random_vector;
using kernels::testing::relative_error;

struct Batch {
  int32_t n_heads = 0, n_kv_heads = 0, head_dim = 0, block_size = 16, n_layers = 2, layer = 1;
  KvDtype dtype = KvDtype::f32;
  std::vector<int32_t> start_pos, token_begin{0}, block_tables, table_begin{0};
  std::vector<std::byte> pool;  // [n_blocks][n_layers][2][n_kv][bs][hd] of dtype
  int64_t block_stride = 0;     // elements
  int32_t n_blocks = 0;
  std::vector<float> q, k, v;   // [n_tokens][n_heads · hd], [n_tokens][n_kv · hd] ×2

  int32_t n_seqs() const { return int32_t(start_pos.size()); }
  int32_t n_tokens() const { return token_begin.back(); }
  int32_t kv_width() const { return n_kv_heads * head_dim; }
  int32_t q_width() const { return n_heads * head_dim; }
  int64_t layer_bytes() const { return int64_t(kv_bytes(dtype, int64_t(n_kv_heads) * block_size * head_dim)); }
  int64_t keys_offset() const { return layer * 2 * layer_bytes(); }  // bytes into the pool
  int64_t values_offset() const { return (layer * 2 + 1) * layer_bytes(); }
  int32_t max_context() const {
    int32_t m = 1;
    for (int32_t s = 0; s < n_seqs(); ++s) m = std::max(m, start_pos[s] + token_begin[s + 1] - token_begin[s]);
    return m;
  }
  // The view for a pool at `base` (host or device memory).
  PagedKvView view(std::byte* base) const {
    return {base + keys_offset(), base + values_offset(), block_stride, n_kv_heads, block_size, head_dim, dtype};
  }
  SpanTable spans() const {
    return {n_seqs(), token_begin.data(), start_pos.data(), block_tables.data(), table_begin.data()};
  }
};

// Sequence s has span span_len[s] at start_pos[s] (0-length spans allowed).
// Every slot before a span's start is written with random keys and values
// (its history), the rest of the pool with garbage.
inline Batch make_batch(int32_t n_heads, int32_t n_kv_heads, int32_t head_dim, int32_t block_size, KvDtype dtype,
                        const std::vector<int32_t>& start_pos, const std::vector<int32_t>& span_len, uint32_t seed) {
  Batch b;
  b.n_heads = n_heads;
  b.n_kv_heads = n_kv_heads;
  b.head_dim = head_dim;
  b.block_size = block_size;
  b.dtype = dtype;
  b.start_pos = start_pos;
  std::mt19937 rng(seed);
  std::vector<int32_t> need;
  for (size_t s = 0; s < start_pos.size(); ++s) {
    need.push_back((start_pos[s] + span_len[s] + block_size - 1) / block_size);
    b.n_blocks += need.back();
    b.token_begin.push_back(b.token_begin.back() + span_len[s]);
  }
  b.n_blocks += 3;
  std::vector<int32_t> ids(size_t(b.n_blocks));
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);
  size_t next = 0;
  for (int32_t n : need) {
    for (int32_t i = 0; i < n; ++i) b.block_tables.push_back(ids[next++]);
    b.table_begin.push_back(int32_t(b.block_tables.size()));
  }
  b.block_stride = int64_t(b.n_layers) * 2 * n_kv_heads * block_size * head_dim;
  const std::vector<float> garbage = random_vector(size_t(b.n_blocks) * b.block_stride, seed + 1, -3.0f, 3.0f);
  b.pool.resize(kv_bytes(dtype, int64_t(garbage.size())));
  kv_store(dtype, garbage.data(), b.pool.data(), int64_t(garbage.size()));
  b.q = random_vector(size_t(b.n_tokens()) * b.q_width(), seed + 2);
  b.k = random_vector(size_t(b.n_tokens()) * b.kv_width(), seed + 3);
  b.v = random_vector(size_t(b.n_tokens()) * b.kv_width(), seed + 4);
  return b;
}

// The history (positions before each span) is already in the pool as
// garbage: attention reads it as keys and values like any other.

// write_kv_q8_kernel's warp on the host: one 32-value block, its largest
// magnitude, scale and quantized values by hd.hpp's functions.
inline void emulate_q8_block(const float* x, uint8_t* block) {
  float amax = 0.0f;
  for (int i = 0; i < kQ8Block; ++i) amax = fmaxf(amax, fabsf(x[i]));
  const float d = q8_delta(amax);
  const uint16_t dh = f32_to_f16(d);
  block[0] = uint8_t(dh & 0xffu);
  block[1] = uint8_t(dh >> 8);
  for (int i = 0; i < kQ8Block; ++i) block[2 + i] = q8_quantize(x[i], q8_inverse(d));
}

// write_kv's loop on the host: one "block" per token, one "thread" per value
// (q8_0: one "warp" per 32 values, emulate_q8_block).
inline void emulate_write_kv(const Batch& b, std::byte* pool) {
  const PagedKvView kv = b.view(pool);
  for (int32_t t = 0; t < b.n_tokens(); ++t) {
    const int32_t s = sequence_of_token(b.token_begin.data(), b.n_seqs(), t);
    const int32_t pos = b.start_pos[size_t(s)] + (t - b.token_begin[size_t(s)]);
    const int32_t* table = b.block_tables.data() + b.table_begin[size_t(s)];
    if (b.dtype == KvDtype::q8_0) {
      for (int32_t e = 0; e < b.kv_width(); e += kQ8Block) {
        const int32_t h = e / b.head_dim, d = e % b.head_dim;
        const int64_t at = q8_bytes(kv_slot(table, pos, h, b.block_size, b.head_dim, b.block_stride) + d);
        emulate_q8_block(b.k.data() + size_t(t) * b.kv_width() + e, static_cast<uint8_t*>(kv.keys) + at);
        emulate_q8_block(b.v.data() + size_t(t) * b.kv_width() + e, static_cast<uint8_t*>(kv.values) + at);
      }
      continue;
    }
    for (int32_t e = 0; e < b.kv_width(); ++e) {
      const int32_t h = e / b.head_dim, d = e % b.head_dim;
      const int64_t dst = kv_slot(table, pos, h, b.block_size, b.head_dim, b.block_stride) + d;
      const float kx = b.k[size_t(t) * b.kv_width() + e], vx = b.v[size_t(t) * b.kv_width() + e];
      switch (b.dtype) {
        case KvDtype::f16:
          static_cast<uint16_t*>(kv.keys)[dst] = kv_from_float<1>(kx);
          static_cast<uint16_t*>(kv.values)[dst] = kv_from_float<1>(vx);
          break;
        case KvDtype::bf16:
          static_cast<uint16_t*>(kv.keys)[dst] = kv_from_float<2>(kx);
          static_cast<uint16_t*>(kv.values)[dst] = kv_from_float<2>(vx);
          break;
        default:
          static_cast<float*>(kv.keys)[dst] = kx;
          static_cast<float*>(kv.values)[dst] = vx;
      }
    }
  }
}

inline float load_kv(KvDtype dtype, const void* base, int64_t i) {
  switch (dtype) {
    case KvDtype::f16: return kv_to_float<1>(static_cast<const uint16_t*>(base)[i]);
    case KvDtype::bf16: return kv_to_float<2>(static_cast<const uint16_t*>(base)[i]);
    case KvDtype::q8_0: return kv_load<3>(base, i);
    default: return static_cast<const float*>(base)[i];
  }
}

// paged_attention's two kernels on the host, in their order of operations:
// per partition, each warp's online softmax over its positions, the warps
// merged in order; then the partitions merged in order. (A warp's dot
// product is a tree of shuffles on the device, a loop here.)
inline void emulate_attention(const Batch& b, const std::byte* pool, float* out) {
  const PagedKvView kv = b.view(const_cast<std::byte*>(pool));
  const int32_t group = b.n_heads / b.n_kv_heads, hd = b.head_dim;
  const float scale = 1.0f / sqrtf(float(hd));
  const int32_t n_parts = attention_partitions(b.max_context()), length = attention_partition_length(b.max_context());
  const size_t width = size_t(hd);
  std::vector<float> qs(width), acc(width), wacc(width), pacc(width);
  for (int32_t t = 0; t < b.n_tokens(); ++t) {
    const int32_t s = sequence_of_token(b.token_begin.data(), b.n_seqs(), t);
    const int32_t n_ctx = causal_context(b.start_pos[size_t(s)], t - b.token_begin[size_t(s)]);
    const int32_t* table = b.block_tables.data() + b.table_begin[size_t(s)];
    for (int32_t qh = 0; qh < b.n_heads; ++qh) {
      const int32_t h = qh / group;
      for (int32_t d = 0; d < hd; ++d) qs[size_t(d)] = b.q[size_t(t) * b.q_width() + size_t(qh) * hd + d] * scale;
      float m_all = neg_inf(), sum_all = 0.0f;
      for (int32_t part = 0; part < n_parts; ++part) {
        const int32_t begin = part * length, end = std::min(n_ctx, begin + length);
        float m_part = neg_inf(), sum_part = 0.0f;
        for (int32_t w = 0; w < kAttentionWarps; ++w) {
          float m = neg_inf(), sum = 0.0f;
          std::fill(wacc.begin(), wacc.end(), 0.0f);
          for (int32_t p = begin + w; p < end; p += kAttentionWarps) {
            const int64_t slot = kv_slot(table, p, h, b.block_size, hd, b.block_stride);
            float dot = 0.0f;
            for (int32_t d = 0; d < hd; ++d) dot += qs[size_t(d)] * load_kv(b.dtype, kv.keys, slot + d);
            float rescale, weight;
            softmax_add(dot, m, sum, rescale, weight);
            for (int32_t d = 0; d < hd; ++d)
              wacc[size_t(d)] = wacc[size_t(d)] * rescale + weight * load_kv(b.dtype, kv.values, slot + d);
          }
          if (w == 0) {
            m_part = m;
            sum_part = sum;
            pacc = wacc;
          } else {
            float fa, fb;
            softmax_merge(m_part, sum_part, m, sum, fa, fb);
            for (int32_t d = 0; d < hd; ++d) pacc[size_t(d)] = pacc[size_t(d)] * fa + wacc[size_t(d)] * fb;
          }
        }
        if (part == 0) {
          m_all = m_part;
          sum_all = sum_part;
          acc = pacc;
        } else {
          float fa, fb;
          softmax_merge(m_all, sum_all, m_part, sum_part, fa, fb);
          for (int32_t d = 0; d < hd; ++d) acc[size_t(d)] = acc[size_t(d)] * fa + pacc[size_t(d)] * fb;
        }
      }
      for (int32_t d = 0; d < hd; ++d)
        out[size_t(t) * b.q_width() + size_t(qh) * hd + d] = acc[size_t(d)] * (1.0f / sum_all);
    }
  }
}

}  // namespace conveyor::kernels::cuda::testing
