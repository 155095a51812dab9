// Paged attention: writing a batch's keys and values into KV-cache blocks, and
// causal grouped-query attention that reads them back through block tables.
//
// The cache layout is model/kv_cache.hpp's: inside one block, one layer's keys
// are [n_kv_heads][block_size][head_dim], and its values follow. PagedKvView
// points at that layer's keys and values in block 0; block b is block_stride
// elements further on (kv_bytes(dtype, block_stride) bytes). Elements are
// `dtype` (kv_dtype.hpp): float32, or f16, bf16 or q8_0, which write_kv
// rounds to and attention widens back to float in registers; every product
// and sum is computed in float (but for the scores of q8_0 caches, and of
// bf16 ones under grouped-query attention, on CPUs with AVX512-VNNI or
// AVX512-BF16, whose queries are rounded to the keys' type:
// attention_dot_products below).
// q8_0 needs a head_dim that is a multiple of 32.
//
// A batch is a list of sequence spans (model/batch.hpp): sequence s brings the
// tokens [token_begin[s], token_begin[s + 1]) of the flattened batch, at the
// consecutive positions that start at start_pos[s]; its block table holds the
// blocks for positions [0, start_pos + span length).
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/cpu/kv_dtype.hpp"

namespace conveyor::kernels {

struct PagedKvView {
  void* keys;            // [n_kv_heads][block_size][head_dim] of one layer, in block 0
  void* values;          // same, for values
  int64_t block_stride;  // elements from a block to the next
  int32_t n_kv_heads = 0;
  int32_t block_size = 0;
  int32_t head_dim = 0;
  KvDtype dtype = KvDtype::f32;
};

struct SpanTable {
  int32_t n_seqs = 0;
  const int32_t* token_begin;   // [n_seqs + 1] offsets into the batch's tokens
  const int32_t* start_pos;     // [n_seqs] position of each span's first token
  const int32_t* block_tables;  // concatenated block ids
  const int32_t* table_begin;   // [n_seqs + 1] offsets into block_tables
  // [n_seqs], or null for none: paged_attention may compute sequence s's
  // tokens at positions below tile_until[s] together (tiles, on AVX-512
  // CPUs); the others it computes one at a time, bit for bit as a decode
  // step of one token computes its position (model/batch.hpp says why).
  const int32_t* tile_until = nullptr;
};

// Stores each token's key and value heads in the slot of its position,
// converted to kv.dtype.
void write_kv(const float* k,  // [n_tokens, ld]: n_kv_heads × head_dim keys per row
              const float* v,  // [n_tokens, ld]
              int64_t ld, const SpanTable& spans, const PagedKvView& kv);

// Scratch reused across calls: it grows to the largest batch seen and then
// stops allocating.
struct AttentionWorkspace {
  std::vector<int32_t> items;  // [n_items][3]: sequence, kv head, first token
  std::vector<float> scratch;  // per-thread scores and accumulators
  // Calls with this workspace widen bf16 and q8_0 keys to float even where
  // the CPU has dot products for them (attention_takes_dot_products below):
  // for callers that stand in for kernels which widen, as the CUDA kernels do.
  bool widen_keys = false;
};

// out = softmax(q·Kᵀ / sqrt(head_dim)) · V per query head, where each token
// attends to its sequence's positions up to its own, and query head h reads
// kv head h / (n_heads / n_kv_heads). The span's keys and values must already
// be in the cache (write_kv). Parallel over (sequence, kv head, token tile).
// On AVX-512 CPUs a span's tokens below spans.tile_until (a prompt's) are
// computed together as flash-style tiles (paged_attention_tile.inc), the
// rest one at a time. Each way, a token's result depends only on its query
// and the cache, not on the call's other tokens or how the span is cut into
// chunks; the two ways agree to float rounding, not bit for bit.
void paged_attention(const float* q,  // [n_tokens, ldq]: n_heads × head_dim per row
                     int64_t ldq, int32_t n_heads, const SpanTable& spans,
                     const PagedKvView& kv,
                     float* out,  // [n_tokens, ldo]: n_heads × head_dim per row
                     int64_t ldo, AttentionWorkspace& workspace);

// Dot products for the scores, on AVX-512 CPUs (quant_matmul.hpp's
// active_isa):
// - bf16 caches, where the CPU has AVX512-BF16, under grouped-query attention
//   with 4 query heads a kv head or more, head sizes that are multiples of 32
//   up to 128: vdpbf16ps products of the stored keys and the queries
//   (times 1/sqrt(head_dim)) rounded to bf16;
// - q8_0 caches, where the CPU has AVX512-VNNI, heads of 64 and 128, with
//   any number of query heads a kv head:
//   vpdpbusd products of the stored keys and the queries (times
//   1/sqrt(head_dim)) rounded to int8 with one scale a head, d = max|q| / 127
//   (q = nearest even of x · (1/d)), summed exactly and scaled by each key
//   block's d and the query's (for prompt tiles too: each row's query
//   rounded alike).
// Elsewhere, when turned off (tests compare both) and for workspaces that ask
// (AttentionWorkspace::widen_keys), keys are widened to float.
// attention_dot_products(dtype) says whether the CPU has them for that cache
// type and they are on; attention_takes_dot_products whether a call on `kv`
// with `n_heads` query heads and `workspace` takes them now.
bool attention_dot_products(KvDtype dtype);
void set_attention_dot_products(bool on);
bool attention_takes_dot_products(const PagedKvView& kv, int32_t n_heads, const AttentionWorkspace& workspace);

// n floats to n elements of `dtype` (rounded to nearest even), and back
// (exact): the conversions write_kv and paged_attention use, row by row.
// For q8_0, n is a multiple of 32.
void kv_store(KvDtype dtype, const float* src, void* dst, int64_t n);
void kv_load(KvDtype dtype, const void* src, float* dst, int64_t n);

}  // namespace conveyor::kernels
