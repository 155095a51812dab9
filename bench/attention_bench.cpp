// attention_bench: paged attention's decode step (or, --prefill, a prefill
// chunk) with the KV cache in f32,
// f16, bf16 and q8_0 (not for heads of 48), for the attention shapes of
// llama-15m (6 heads of 48), llama-110m (12 heads of 64), llama-0.8b (32
// query heads of 64 over 4 kv heads) and Llama 3 8B (32 query heads of 128
// over 8 kv heads), at several batch sizes and contexts. Each
// sequence's blocks are scattered over the pool, as the block manager leaves
// them. Prints the median time of one layer's call and the KV bytes it read
// per second.
//
// usage: attention_bench [--threads N] [--reps R] [--isa avx2|avx512] [--shape S] [--dtype D]
//                        [--no-dot] [--prefill]
// (--isa: the compilation that runs, as decode_bench's; --shape and --dtype:
// only that shape or cache type, for profiling; --no-dot: bf16 and q8_0
// keys widened to float where the CPU has AVX512-BF16 or AVX512-VNNI dot
// products for them (paged_attention.hpp); --prefill:
// one sequence's prefill chunks instead of decode steps, with the attention's
// multiply-adds per second)
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

// Median seconds of one call: `batch` sequences, each `span` tokens at the
// positions [ctx - span, ctx) over ctx cached positions (span 1: a decode
// step; more: a prompt's chunk, as the engine marks it: SpanTable::tile_until).
double time_call(const Shape& s, KvDtype dtype, int32_t batch, int32_t ctx, int32_t span, int reps) {
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
    token_begin[size_t(b)] = b * span;
    table_begin[size_t(b)] = b * per_seq;
    if (b < batch) start_pos[size_t(b)] = ctx - span;
  }
  const std::vector<int32_t> tile_until(static_cast<size_t>(batch), span > 1 ? ctx : 0);
  const SpanTable spans{batch,           token_begin.data(), start_pos.data(), ids.data(), table_begin.data(),
                        tile_until.data()};
  const PagedKvView view{pool.data(), pool.data() + kv_bytes(dtype, int64_t(n_kv) * bs * hd), block_stride, n_kv,
                         bs, hd, dtype};
  const int64_t width = int64_t(s.n_heads) * hd;
  std::vector<float> q(size_t(batch) * span * width), out(size_t(batch) * span * width);
  {
    std::mt19937 rng(3);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    for (float& v : q) v = dist(rng);
  }
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
  bool prefill = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--threads") && i + 1 < argc) omp_set_num_threads(std::atoi(argv[++i]));
    else if (!std::strcmp(argv[i], "--reps") && i + 1 < argc) reps = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--isa") && i + 1 < argc) {
      if (!conveyor::bench::force_isa_flag(argv[++i])) return 2;
    } else if (!std::strcmp(argv[i], "--prefill")) {
      prefill = true;
    } else if (!std::strcmp(argv[i], "--no-dot")) {
      set_attention_dot_products(false);
    } else if (!std::strcmp(argv[i], "--shape") && i + 1 < argc) {
      only_shape = argv[++i];
      if (!one_of("--shape", only_shape, {"15m", "110m", "0.8b", "8b"})) return 2;
    } else if (!std::strcmp(argv[i], "--dtype") && i + 1 < argc) {
      only_dtype = argv[++i];
      if (!one_of("--dtype", only_dtype, {"f32", "f16", "bf16", "q8_0"})) return 2;
    } else {
      std::fprintf(stderr,
                   "usage: attention_bench [--threads N] [--reps R] [--isa avx2|avx512] [--shape S] [--dtype D] "
                   "[--no-dot] [--prefill]\n");
      return 2;
    }
  }
  const char* unit = prefill ? "GFLOP/s" : "GB/s";
  std::printf("paged attention, %s, one layer; median of %d calls, %d threads; decode scores under grouped-query "
              "attention: bf16 %s, q8_0 %s\n",
              prefill ? "one sequence's prefill chunk of `span` tokens ending at position ctx"
                      : "one decode token per sequence",
              reps, omp_get_max_threads(), attention_dot_products(KvDtype::bf16) ? "vdpbf16ps" : "keys widened",
              attention_dot_products(KvDtype::q8_0) ? "vpdpbusd" : "keys widened");
  std::printf("%-10s %5s %5s %5s", "shape", "batch", "span", "ctx");
  for (const char* dtype : {"f32", "f16", "bf16", "q8_0"}) {
    const std::string column = std::string(dtype) + " us (" + unit + ")";
    std::printf(" | %20s", column.c_str());
  }
  std::printf("\n");
  struct Case {
    int32_t batch, span, ctx;
  };
  const std::vector<Case> cases =
      prefill ? std::vector<Case>{{1, 64, 64}, {1, 512, 512}, {1, 64, 1024}, {1, 512, 1024}, {1, 512, 2048}}
              : std::vector<Case>{{1, 1, 256}, {1, 1, 1024}, {8, 1, 256}, {8, 1, 1024}, {32, 1, 256}, {32, 1, 1024}};
  for (const Shape& s : {Shape{"15m", 6, 48, 6}, Shape{"110m", 12, 64, 12}, Shape{"0.8b", 32, 64, 4},
                       Shape{"8b", 32, 128, 8}}) {
    if (!only_shape.empty() && only_shape != s.name) continue;
    for (const Case& c : cases) {
      std::printf("%-10s %5d %5d %5d", s.name, c.batch, c.span, c.ctx);
      for (KvDtype dtype : {KvDtype::f32, KvDtype::f16, KvDtype::bf16, KvDtype::q8_0}) {
        if (!only_dtype.empty() && only_dtype != kv_dtype_name(dtype)) {
          std::printf(" | %20s", "");
          continue;
        }
        if (!kv_dtype_fits(dtype, s.head_dim)) {  // q8_0 needs heads of whole 32-blocks
          std::printf(" | %20s", "-");
          continue;
        }
        const double t = time_call(s, dtype, c.batch, c.ctx, c.span, reps);
        double rate;
        if (prefill) {
          // q·k and p·v for each token over the positions it sees: 4 flops an element.
          double seen = 0.0;
          for (int32_t i = 0; i < c.span; ++i) seen += c.ctx - c.span + i + 1;
          rate = 4.0 * c.batch * seen * s.n_heads * s.head_dim / t * 1e-9;
        } else {
          rate = 2.0 * c.batch * c.ctx * double(kv_bytes(dtype, int64_t(s.n_kv_heads) * s.head_dim)) / t * 1e-9;
        }
        std::printf(" | %9.1f (%6.1f)   ", t * 1e6, rate);
      }
      std::printf("\n");
    }
  }
  return 0;
}
