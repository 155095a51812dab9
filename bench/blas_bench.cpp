// Times y = x·Wᵀ (x [n, k], W [m, k], row-major) for decode-like shapes through
// one BLAS. The same source is built once per library (see bench/CMakeLists.txt)
// because two BLAS libraries export the same symbols and cannot share a binary.
//
//   blas_bench_<lib> [--threads N] [--reps R]
//
// For each shape it prints the median time with W hot (the same matrix every
// call, so it sits in cache when it fits) and cold (rotating through enough
// copies of W to overflow the last-level cache, as a decode step streaming the
// whole model sees it), plus a large square sgemm for the compute peak.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench_util.hpp"

#if defined(CONVEYOR_BENCH_DNNL)
#include <oneapi/dnnl/dnnl.h>
#elif defined(CONVEYOR_BENCH_PACKED)
#include "kernels/cpu/matmul.hpp"
#else
#include <cblas.h>
#endif

#if defined(CONVEYOR_BENCH_BLIS)
extern "C" void bli_thread_set_num_threads(long value);
#endif

namespace {

void set_threads(int n) {
  omp_set_num_threads(n);
#if defined(CONVEYOR_BENCH_OPENBLAS)
  openblas_set_num_threads(n);
#elif defined(CONVEYOR_BENCH_BLIS)
  bli_thread_set_num_threads(n);
#endif
}

// y [n, m] = x [n, k] · W [m, k]ᵀ (W packed by prepare() for the packed kernel)
void matmul(const float* x, const float* w, float* y, int n, int m, int k) {
#if defined(CONVEYOR_BENCH_PACKED)
  conveyor::kernels::matmul_packed(x, k, n, w, m, k, y, m);
#elif defined(CONVEYOR_BENCH_DNNL)
  dnnl_sgemm('N', 'T', n, m, k, 1.0f, x, k, w, k, 0.0f, y, m);
#else
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, m, k, 1.0f, x, k, w, k, 0.0f, y, m);
#endif
}

// Puts `copies` matrices [m, k] filled with a pattern into w, in the layout
// that matmul() reads.
std::vector<float> prepare(int m, int k, size_t copies) {
  std::vector<float> plain(size_t(m) * k);
  for (size_t i = 0; i < plain.size(); ++i) plain[i] = float(i % 13) * 0.001f;
#if defined(CONVEYOR_BENCH_PACKED)
  const size_t each = conveyor::kernels::packed_matrix_floats(m, k);
  std::vector<float> w(each * copies);
  for (size_t c = 0; c < copies; ++c) conveyor::kernels::pack_matrix(plain.data(), m, k, w.data() + c * each);
#else
  const size_t each = plain.size();
  std::vector<float> w(each * copies);
  for (size_t c = 0; c < copies; ++c) std::copy(plain.begin(), plain.end(), w.begin() + c * each);
#endif
  return w;
}

struct Shape {
  const char* model;
  int m, k;
};

}  // namespace

int main(int argc, char** argv) {
  int threads = 2, reps = 200;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--threads")) threads = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--reps")) reps = std::atoi(argv[i + 1]);
  }
  set_threads(threads);

  const Shape shapes[] = {{"15m", 288, 288},   {"15m", 768, 288},   {"15m", 288, 768},
                          {"15m", 32000, 288}, {"110m", 768, 768},  {"110m", 2048, 768},
                          {"110m", 768, 2048}, {"110m", 32000, 768}};
  const int ns[] = {1, 8, 32, 64, 256};
  const size_t cold_bytes = size_t(128) << 20;  // 4x the 32 MiB L3

  std::printf("# backend=%s threads=%d reps=%d\n", CONVEYOR_BENCH_BACKEND_NAME, threads, reps);
  std::printf("%-8s %-5s %6s %5s %3s %10s %10s %8s %8s\n", "backend", "model", "m", "k", "n",
              "hot_us", "cold_us", "cold_GBs", "hot_GFs");
  std::vector<float> x(size_t(256) * 2048), y(size_t(256) * 32000);
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(i % 17) * 0.01f;

  for (const Shape& s : shapes) {
    const size_t w_floats = size_t(s.m) * s.k;
    const size_t copies = std::max<size_t>(2, cold_bytes / (w_floats * sizeof(float)));
    const std::vector<float> w = prepare(s.m, s.k, copies);
    const size_t stride = w.size() / copies;
    for (int n : ns) {
      for (int i = 0; i < 3; ++i) matmul(x.data(), w.data(), y.data(), n, s.m, s.k);
      std::vector<double> hot, cold;
      for (int r = 0; r < reps; ++r) {
        double t0 = now_s();
        matmul(x.data(), w.data(), y.data(), n, s.m, s.k);
        hot.push_back(now_s() - t0);
      }
      for (int r = 0; r < reps; ++r) {
        const float* wc = w.data() + (size_t(r) % copies) * stride;
        double t0 = now_s();
        matmul(x.data(), wc, y.data(), n, s.m, s.k);
        cold.push_back(now_s() - t0);
      }
      const double h = median(hot), c = median(cold);
      std::printf("%-8s %-5s %6d %5d %3d %10.1f %10.1f %8.1f %8.1f\n", CONVEYOR_BENCH_BACKEND_NAME,
                  s.model, s.m, s.k, n, h * 1e6, c * 1e6, w_floats * 4.0 / c * 1e-9,
                  2.0 * n * w_floats / h * 1e-9);
    }
  }

  // Compute peak: a large square product.
  const int big = 2048;
  std::vector<float> a(size_t(big) * big, 0.5f), c(size_t(big) * big);
  const std::vector<float> b = prepare(big, big, 1);
  matmul(a.data(), b.data(), c.data(), big, big, big);
  std::vector<double> t;
  for (int r = 0; r < 5; ++r) {
    double t0 = now_s();
    matmul(a.data(), b.data(), c.data(), big, big, big);
    t.push_back(now_s() - t0);
  }
  std::printf("%-8s peak sgemm %dx%dx%d: %.1f GFLOP/s\n", CONVEYOR_BENCH_BACKEND_NAME, big, big,
              big, 2.0 * big * big * big / median(t) * 1e-9);
  return 0;
}
