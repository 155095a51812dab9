// oneDNN's matmul primitive on weights reordered once at load
// (kernels/cpu/matmul_dnnl.hpp) against conveyor's packed-panel kernel
// (kernels/cpu/matmul.hpp), y = x·Wᵀ, for the decode shapes of llama-15m and
// llama-110m and a prefill batch.
//
//   dnnl_bench [--threads N] [--rounds R] [--ms T]
//
// Both backends run "cold": each rotates through enough copies of its
// prepared W to overflow the last-level cache (128 MiB), as a decode step that
// streams the whole model sees it. The machine is shared and noisy, so the two
// are interleaved: each round times one backend then the other (order
// alternating between rounds), about T ms each, and keeps the median call;
// the table shows each backend's best round (neighbours' builds take the
// cores for whole rounds at a time) and the median of the per-round ratios
// dnnl / packed. The per-step sums add every product of one forward
// step (per layer wq, wk, wv, wo, w1, w3, w2, then the classifier), like
// kernels/cpu/README.md.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "kernels/cpu/matmul.hpp"
#include "kernels/cpu/matmul_dnnl.hpp"
#include "bench_util.hpp"

namespace {

using conveyor::kernels::DnnlMatmul;

struct Shape {
  const char* model;
  int m, k;
  int per_step;  // how many products of this shape one forward step runs
};

struct Result {
  double packed_us, dnnl_us, ratio;  // best rounds; median per-round ratio
};

}  // namespace

int main(int argc, char** argv) {
  int threads = 2, rounds = 5;
  double round_ms = 60;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--threads")) threads = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--rounds")) rounds = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--ms")) round_ms = std::atof(argv[i + 1]);
  }
  omp_set_num_threads(threads);

  // llama-15m: dim 288, hidden 768, 6 layers; llama-110m: 768, 2048, 12 layers.
  const Shape shapes[] = {{"15m", 288, 288, 4 * 6},    {"15m", 768, 288, 2 * 6},
                          {"15m", 288, 768, 6},        {"15m", 32000, 288, 1},
                          {"110m", 768, 768, 4 * 12},  {"110m", 2048, 768, 2 * 12},
                          {"110m", 768, 2048, 12},     {"110m", 32000, 768, 1}};
  const int ns[] = {1, 8, 32, 64, 512};
  const size_t cold_bytes = size_t(128) << 20;  // 4x the 32 MiB L3

  std::printf("# threads=%d rounds=%d ms/round/backend=%.0f, cold W, microseconds\n", threads,
              rounds, round_ms);
  std::printf("%-5s %6s %5s %4s %10s %10s %6s %6s  %s\n", "model", "m", "k", "n", "packed_us",
              "dnnl_us", "ratio", "r_med", "dnnl impl");
  std::vector<float> x(size_t(512) * 2048), y(size_t(512) * 32000);
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(i % 17) * 0.01f;

  std::map<std::pair<std::string, int>, Result> sums;  // (model, n) -> per-step sums
  for (const Shape& s : shapes) {
    std::vector<float> plain(size_t(s.m) * s.k);
    for (size_t i = 0; i < plain.size(); ++i) plain[i] = float(i % 13) * 0.001f;
    const size_t copies = std::max<size_t>(2, cold_bytes / (plain.size() * sizeof(float)));
    const size_t each = conveyor::kernels::packed_matrix_floats(s.m, s.k);
    std::vector<float> packed(each * copies);
    std::vector<DnnlMatmul> dnnl;
    for (size_t c = 0; c < copies; ++c) {
      conveyor::kernels::pack_matrix(plain.data(), s.m, s.k, packed.data() + c * each);
      dnnl.emplace_back(plain.data(), s.m, s.k);
    }
    size_t next_packed = 0, next_dnnl = 0;
    auto call_packed = [&](int n) {
      const float* w = packed.data() + (next_packed++ % copies) * each;
      conveyor::kernels::matmul_packed(x.data(), s.k, n, w, s.m, s.k, y.data(), s.m);
    };
    auto call_dnnl = [&](int n) {
      dnnl[next_dnnl++ % copies].run(x.data(), s.k, n, y.data(), s.m);
    };
    for (int n : ns) {
      // Warm up: every copy creates its primitive for n (oneDNN's own
      // primitive cache makes all but the first cheap).
      for (size_t c = 0; c < copies; ++c) call_dnnl(n);
      call_packed(n);
      const double t0 = now_s();
      call_packed(n);
      const double est = now_s() - t0;
      const int reps = std::clamp(int(round_ms * 1e-3 / std::max(est, 1e-7)), 3, 2000);
      std::vector<double> rp, rd, ratio;
      for (int r = 0; r < rounds; ++r) {
        double med[2];
        for (int pass = 0; pass < 2; ++pass) {
          const bool dnnl_now = (pass == 0) == (r % 2 == 1);
          std::vector<double> t(static_cast<size_t>(reps));
          for (int i = 0; i < reps; ++i) {
            const double a = now_s();
            dnnl_now ? call_dnnl(n) : call_packed(n);
            t[size_t(i)] = now_s() - a;
          }
          med[dnnl_now ? 1 : 0] = median(t);
        }
        rp.push_back(med[0]);
        rd.push_back(med[1]);
        ratio.push_back(med[1] / med[0]);
      }
      const Result res{*std::min_element(rp.begin(), rp.end()) * 1e6,
                       *std::min_element(rd.begin(), rd.end()) * 1e6, median(ratio)};
      std::printf("%-5s %6d %5d %4d %10.1f %10.1f %6.2f %6.2f  %s\n", s.model, s.m, s.k, n,
                  res.packed_us, res.dnnl_us, res.dnnl_us / res.packed_us, res.ratio,
                  dnnl[0].implementation(n));
      std::fflush(stdout);
      Result& sum = sums[{s.model, n}];
      sum.packed_us += s.per_step * res.packed_us;
      sum.dnnl_us += s.per_step * res.dnnl_us;
    }
  }

  std::printf("\n# per forward step (all products), ms; ratio = dnnl / packed\n");
  std::printf("%-5s %4s %10s %10s %8s\n", "model", "n", "packed_ms", "dnnl_ms", "ratio");
  for (const char* model : {"15m", "110m"})
    for (int n : ns) {
      const Result& r = sums[{model, n}];
      std::printf("%-5s %4d %10.2f %10.2f %8.2f\n", model, n, r.packed_us * 1e-3,
                  r.dnnl_us * 1e-3, r.dnnl_us / r.packed_us);
    }

  // What a batch size not seen before costs: a fresh object's first call
  // creates (JIT-compiles) its primitive, unless oneDNN's primitive cache has it.
  {
    std::vector<float> plain(size_t(768) * 768, 0.001f);
    DnnlMatmul fresh(plain.data(), 768, 768);
    const char* what[] = {"new n=37", "n=37 again (cached)", "new n=511", "new n=300"};
    const int sizes[] = {37, 37, 511, 300};
    for (int i = 0; i < 4; ++i) {
      const double t0 = now_s();
      fresh.run(x.data(), 768, sizes[i], y.data(), 768);
      std::printf("# 768x768, %s: %.1f us\n", what[i], (now_s() - t0) * 1e6);
    }
  }
  return 0;
}
