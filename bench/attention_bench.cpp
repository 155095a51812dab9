// attention_bench: paged attention's decode step with the KV cache in f32,
// f16, bf16 and q8_0 (not for heads of 48), for the attention shapes of
// llama-15m (6 heads of 48), llama-110m (12 heads of 64), llama-0.8b (32
// query heads of 64 over 4 kv heads) and Llama 3 8B (32 query heads of 128
// over 8 kv heads), at several batch sizes and contexts. Each
// sequence's blocks are scattered over the pool, as the block manager leaves
// them. Prints the median time of one layer's call and the KV bytes it read
// per second.
//
// usage: attention_bench [--threads N] [--reps R] [--isa avx2|avx512] [--shape S] [--dtype D]
//                        [--no-bf16-dot]
// (--isa: the compilation that runs, as decode_bench's; --shape and --dtype:
// only that shape or cache type, for profiling; --no-bf16-dot: bf16 keys
// widened to float where the CPU has AVX512-BF16 dot products)
#include <omp.h>

#include <algorithm>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <numeric>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "bench/bench_util.hpp"
#include "bench/isa_flag.hpp"
#include "kernels/cpu/paged_attention.hpp"

using namespace conveyor::kernels;

namespace {

struct Shape {
  const char* name;
  int32_t n_heads, head_dim, n_kv_heads;
};

// Median seconds of one decode call: `batch` sequences, each one token at
// position ctx - 1 over ctx cached positions.
double time_decode(const Shape& s, KvDtype dtype, int32_t batch, int32_t ctx, int reps) {
  const int32_t bs = 16, n_kv = s.n_kv_heads, hd = s.head_dim;
  const int32_t per_seq = (ctx + bs - 1) / bs, n_blocks = batch * per_seq;
  // One layer's keys and values per block (the other layers only stride past).
  const int64_t block_stride = int64_t(2) * n_kv * bs * hd;
  std::vector<std::byte> pool(kv_bytes(dtype, int64_t(n_blocks) * block_stride));
  {
    std::vector<float> values(size_t(block_stride) * n_blocks);
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    for (float& v : values) v = dist(rng);
    kv_store(dtype, values.data(), pool.data(), int64_t(values.size()));
  }
  std::vector<int32_t> ids(static_cast<size_t>(n_blocks));
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), std::mt19937(2));
  std::vector<int32_t> token_begin(static_cast<size_t>(batch) + 1), start_pos(static_cast<size_t>(batch)),
      table_begin(static_cast<size_t>(batch) + 1);
  for (int32_t b = 0; b <= batch; ++b) {
    token_begin[size_t(b)] = b;
    table_begin[size_t(b)] = b * per_seq;
    if (b < batch) start_pos[size_t(b)] = ctx - 1;
  }
  const SpanTable spans{batch, token_begin.data(), start_pos.data(), ids.data(), table_begin.data()};
  const PagedKvView view{pool.data(), pool.data() + kv_bytes(dtype, int64_t(n_kv) * bs * hd), block_stride, n_kv,
                         bs, hd, dtype};
  const int64_t width = int64_t(s.n_heads) * hd;
  std::vector<float> q(size_t(batch) * width, 0.1f), out(size_t(batch) * width);
  AttentionWorkspace ws;
  paged_attention(q.data(), width, s.n_heads, spans, view, out.data(), width, ws);  // warm up
  std::vector<double> times;
  for (int r = 0; r < reps; ++r) {
    const double t0 = now_s();
    paged_attention(q.data(), width, s.n_heads, spans, view, out.data(), width, ws);
    times.push_back(now_s() - t0);
  }
  return median(times);
}

// Whether `value` is one of `names`; if not, says so.
bool one_of(const char* flag, const std::string& value, std::initializer_list<std::string_view> names) {
  if (std::find(names.begin(), names.end(), value) != names.end()) return true;
  std::fprintf(stderr, "%s: one of", flag);
  for (std::string_view n : names) std::fprintf(stderr, " %.*s", int(n.size()), n.data());
  std::fprintf(stderr, "\n");
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 31;
  std::string only_shape, only_dtype;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--threads") && i + 1 < argc) omp_set_num_threads(std::atoi(argv[++i]));
    else if (!std::strcmp(argv[i], "--reps") && i + 1 < argc) reps = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--isa") && i + 1 < argc) {
      if (!conveyor::bench::force_isa_flag(argv[++i])) return 2;
    } else if (!std::strcmp(argv[i], "--no-bf16-dot")) {
      set_attention_bf16_dot(false);
    } else if (!std::strcmp(argv[i], "--shape") && i + 1 < argc) {
      only_shape = argv[++i];
      if (!one_of("--shape", only_shape, {"15m", "110m", "0.8b", "8b"})) return 2;
    } else if (!std::strcmp(argv[i], "--dtype") && i + 1 < argc) {
      only_dtype = argv[++i];
      if (!one_of("--dtype", only_dtype, {"f32", "f16", "bf16", "q8_0"})) return 2;
    } else {
      std::fprintf(stderr,
                   "usage: attention_bench [--threads N] [--reps R] [--isa avx2|avx512] [--shape S] [--dtype D] "
                   "[--no-bf16-dot]\n");
      return 2;
    }
  }
  std::printf("paged attention, one decode token per sequence, one layer; median of %d calls, %d threads; "
              "bf16 scores under grouped-query attention: %s\n",
              reps, omp_get_max_threads(), attention_bf16_dot() ? "vdpbf16ps" : "keys widened to float");
  std::printf("%-10s %5s %5s | %20s | %20s | %20s | %20s\n", "shape", "batch", "ctx", "f32 us (GB/s)",
              "f16 us (GB/s)", "bf16 us (GB/s)", "q8_0 us (GB/s)");
  for (const Shape& s : {Shape{"15m", 6, 48, 6}, Shape{"110m", 12, 64, 12}, Shape{"0.8b", 32, 64, 4},
                       Shape{"8b", 32, 128, 8}}) {
    if (!only_shape.empty() && only_shape != s.name) continue;
    for (int32_t batch : {1, 8, 32})
      for (int32_t ctx : {256, 1024}) {
        std::printf("%-10s %5d %5d", s.name, batch, ctx);
        for (KvDtype dtype : {KvDtype::f32, KvDtype::f16, KvDtype::bf16, KvDtype::q8_0}) {
          if (!only_dtype.empty() && only_dtype != kv_dtype_name(dtype)) {
            std::printf(" | %20s", "");
            continue;
          }
          if (!kv_dtype_fits(dtype, s.head_dim)) {  // q8_0 needs heads of whole 32-blocks
            std::printf(" | %20s", "-");
            continue;
          }
          const double t = time_decode(s, dtype, batch, ctx, reps);
          const double bytes = 2.0 * batch * ctx * double(kv_bytes(dtype, int64_t(s.n_kv_heads) * s.head_dim));
          std::printf(" | %9.1f (%6.1f)   ", t * 1e6, bytes / t * 1e-9);
        }
        std::printf("\n");
      }
  }
  return 0;
}
