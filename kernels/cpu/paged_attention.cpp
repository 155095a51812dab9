#include "kernels/cpu/paged_attention.hpp"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <vector>

#include "kernels/cpu/quant_matmul.hpp"

// The kernels with the build's own flags, for CPUs without AVX-512. Where
// those flags are AVX-512's already (-march=native on such a CPU), the
// AVX-512 compilation's kernels are the build's own: this one leaves its
// kernels out (they took a third of the library's compile time) and the
// items go to those (the rest of it, light, stays).
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__F16C__) && defined(__FMA__)
#define CONVEYOR_ATTENTION_NO_ITEMS 1
#endif
#define CONVEYOR_ISA_NS base
#include "kernels/cpu/paged_attention.inc"
#undef CONVEYOR_ISA_NS

namespace conveyor::kernels {

// paged_attention_avx512.cpp's.
namespace avx512 {
void kv_store(KvDtype dtype, const float* src, void* dst, int64_t n);
void kv_load(KvDtype dtype, const void* src, float* dst, int64_t n);
void write_kv(const float* k, const float* v, int64_t ld, const SpanTable& spans, const PagedKvView& kv);
void attend_items(const float* q, int64_t ldq, const SpanTable& spans, const PagedKvView& kv,
                  float* out, int64_t ldo, const int32_t* items, int32_t n_items,
                  int32_t heads_per_item, int32_t item_tokens, int32_t group, float* scratch, size_t per_thread);
}  // namespace avx512

// paged_attention_avx512bf16.cpp's.
namespace avx512bf16 {
void attend_items(const float* q, int64_t ldq, const SpanTable& spans, const PagedKvView& kv,
                  float* out, int64_t ldo, const int32_t* items, int32_t n_items,
                  int32_t heads_per_item, int32_t item_tokens, int32_t group, float* scratch, size_t per_thread);
}  // namespace avx512bf16

// paged_attention_avx512vnni.cpp's.
namespace avx512vnni {
void attend_items(const float* q, int64_t ldq, const SpanTable& spans, const PagedKvView& kv,
                  float* out, int64_t ldo, const int32_t* items, int32_t n_items,
                  int32_t heads_per_item, int32_t item_tokens, int32_t group, float* scratch, size_t per_thread);
}  // namespace avx512vnni

namespace {

// The AVX-512 compilation where the kernels use AVX-512 (active_isa():
// forced in tests and benchmarks), else the build's own.
bool on_avx512() { return isa_has_avx512(active_isa()); }

std::atomic<bool> dot_products_off{false};

bool cpu_has_dot_products(KvDtype dtype) {
#if defined(__x86_64__)
  static const bool avx512 = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl");
  }();
  static const bool bf16 = avx512 && __builtin_cpu_supports("avx512bf16");
  static const bool q8_0 = avx512 && __builtin_cpu_supports("avx512vnni");
  return dtype == KvDtype::bf16 ? bf16 : dtype == KvDtype::q8_0 && q8_0;
#else
  (void)dtype;
  return false;
#endif
}

using AttendItemsFn = decltype(&avx512::attend_items);

// The compilation whose attend_items serves this call.
AttendItemsFn items_kernel(const PagedKvView& kv, int32_t n_heads, const AttentionWorkspace& workspace) {
  if (attention_takes_dot_products(kv, n_heads, workspace))
    return kv.dtype == KvDtype::bf16 ? avx512bf16::attend_items : avx512vnni::attend_items;
#ifdef CONVEYOR_ATTENTION_NO_ITEMS
  return avx512::attend_items;
#else
  return on_avx512() ? avx512::attend_items : base::attend_items;
#endif
}

}  // namespace

bool attention_dot_products(KvDtype dtype) {
  return cpu_has_dot_products(dtype) && !dot_products_off.load(std::memory_order_relaxed);
}

void set_attention_dot_products(bool on) { dot_products_off.store(!on, std::memory_order_relaxed); }

bool attention_takes_dot_products(const PagedKvView& kv, int32_t n_heads, const AttentionWorkspace& workspace) {
  const int32_t hd = kv.head_dim;
  const bool shape = kv.dtype == KvDtype::bf16 ? hd % 32 == 0 && hd <= 128
                     : kv.dtype == KvDtype::q8_0 ? hd == 64 || hd == 128
                                                 : false;
  // bf16's under grouped-query attention alone: with fewer query heads a kv
  // head they ran 3-15% slower than widening at batches 8-32 on the 110M shape.
  const bool heads = kv.dtype == KvDtype::q8_0 ||
                     (kv.n_kv_heads > 0 && n_heads / kv.n_kv_heads >= base::kChunkMinGroup);
  return shape && heads && !workspace.widen_keys && on_avx512() && attention_dot_products(kv.dtype);
}

void kv_store(KvDtype dtype, const float* src, void* dst, int64_t n) {
  if (on_avx512()) return avx512::kv_store(dtype, src, dst, n);
  base::kv_store(dtype, src, dst, n);
}

void kv_load(KvDtype dtype, const void* src, float* dst, int64_t n) {
  if (on_avx512()) return avx512::kv_load(dtype, src, dst, n);
  base::kv_load(dtype, src, dst, n);
}

void write_kv(const float* k, const float* v, int64_t ld, const SpanTable& spans,
              const PagedKvView& kv) {
  if (on_avx512()) return avx512::write_kv(k, v, ld, spans, kv);
  base::write_kv(k, v, ld, spans, kv);
}

void paged_attention(const float* q, int64_t ldq, int32_t n_heads, const SpanTable& spans,
                     const PagedKvView& kv, float* out, int64_t ldo,
                     AttentionWorkspace& workspace) {
  using base::kItemsPerThread, base::kTokenTile;
  const int32_t n_kv = kv.n_kv_heads, group = n_heads / n_kv, hd = kv.head_dim;
  const int max_threads = omp_get_max_threads();
  // An item takes kTokenTile tokens, or, where the tile kernel runs (the
  // AVX-512 compilations, and the build's own where it has tiles:
  // paged_attention_tile.inc's kTiles), more where that leaves its rows
  // (tokens × query heads a kv head) short of what the tiles want.
  const int32_t item_tokens = on_avx512() || base::kTiles
                                  ? std::max(kTokenTile, base::kTileRowsWanted / std::max(group, 1))
                                  : kTokenTile;
  // An item takes a run of kv heads: as many as still leaves every thread
  // kItemsPerThread items, since a block's heads are contiguous and one long
  // read streams better than several short ones.
  int64_t tiles = 0;
  for (int32_t s = 0; s < spans.n_seqs; ++s)
    tiles += (base::sequence(spans, s).n_tokens + item_tokens - 1) / item_tokens;
  const int32_t heads_per_item = int32_t(
      std::clamp<int64_t>(tiles * n_kv / (int64_t(kItemsPerThread) * max_threads), 1, n_kv));
  std::vector<int32_t>& items = workspace.items;
  items.clear();
  for (int32_t s = 0; s < spans.n_seqs; ++s) {
    const int32_t n_tokens = base::sequence(spans, s).n_tokens;
    for (int32_t h = 0; h < n_kv; h += heads_per_item)
      for (int32_t i = 0; i < n_tokens; i += item_tokens) items.insert(items.end(), {s, h, i});
  }
  const int32_t n_items = int32_t(items.size() / 3);
  const size_t per_thread =
      (base::scratch_floats(heads_per_item, item_tokens, group, hd, kv.block_size) + 15) / 16 * 16;
  if (workspace.scratch.size() < per_thread * max_threads)
    workspace.scratch.resize(per_thread * max_threads);
  const AttendItemsFn attend_items = items_kernel(kv, n_heads, workspace);
  attend_items(q, ldq, spans, kv, out, ldo, items.data(), n_items, heads_per_item, item_tokens, group,
               workspace.scratch.data(), per_thread);
}

}  // namespace conveyor::kernels
