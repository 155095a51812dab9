// The quantized products alone (kernels/cpu/quant_matmul.hpp), one shape at a
// time, against the int8 peak measured in the same run: where decode_bench
// times a whole step, this separates the kernel's own efficiency from what a
// step adds around it (other work, threads, the shapes' mix).
//
//   quant_matmul_bench [--types q4_0,q4_k,q5_k,q6_k,q8_0] [--batches 1,4,16,64]
//                      [--shapes 2048x768,768x2048,768x768] [--threads 2]
//                      [--matrices 24] [--repeats 5] [--isa avx2|avxvnni|avx512|amx]
//
// A shape MxK is W's rows by columns (y = x·Wᵀ, x of batch rows). Weights
// are random floats encoded as llama.cpp encodes them (model/formats/
// quantize.hpp). The product runs over --matrices copies of W in turn, so
// that W comes from memory as a model's layers do (--matrices 1 keeps it in
// cache); each row reports the best of --repeats timings of 50 products:
// microseconds a product, GOP/s (2·batch·M·K), the share of the int8 peak of
// the path that ran (bench/int8_peak.hpp; the best of the readings taken at
// the start and after each row), and W's bytes read per second. The last
// line gives the peaks.
#include <algorithm>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include <omp.h>

#include "bench/bench_util.hpp"
#include "bench/int8_peak.hpp"
#include "bench/isa_flag.hpp"
#include "kernels/cpu/quant_formats.hpp"
#include "kernels/cpu/quant_matmul.hpp"
#include "model/formats/quantize.hpp"

namespace conveyor {
namespace {

using kernels::WeightType;

struct TypeName {
  const char* name;
  WeightType type;
  void (*encode)(const float*, uint8_t*, size_t);
};

constexpr TypeName kTypes[] = {
    {"q4_0", WeightType::q4_0, quantize_q4_0}, {"q4_k", WeightType::q4_k, quantize_q4_k},
    {"q5_k", WeightType::q5_k, quantize_q5_k}, {"q6_k", WeightType::q6_k, quantize_q6_k},
    {"q8_0", WeightType::q8_0, quantize_q8_0},
};

const TypeName* find_type(const std::string& name) {
  for (const TypeName& t : kTypes)
    if (name == t.name) return &t;
  return nullptr;
}

struct Shape {
  int32_t m = 0, k = 0;
};

bool parse_shape(const std::string& s, Shape& out) {
  return std::sscanf(s.c_str(), "%dx%d", &out.m, &out.k) == 2 && out.m > 0 && out.k > 0;
}

int usage() {
  std::fprintf(stderr,
               "usage: quant_matmul_bench [--types q4_0,q4_k,q5_k,q6_k,q8_0] [--batches 1,4,16,64]\n"
               "                          [--shapes 2048x768,768x2048,768x768] [--threads 2]\n"
               "                          [--matrices 24] [--repeats 5] [--isa avx2|avxvnni|avx512|amx]\n");
  return 2;
}

}  // namespace
}  // namespace conveyor

int main(int argc, char** argv) {
  using namespace conveyor;
  std::vector<std::string> types = {"q4_0", "q4_k", "q6_k", "q8_0"};
  std::vector<int> batches = {1, 4, 16, 64};
  std::vector<std::string> shapes = {"2048x768", "768x2048", "768x768"};
  int threads = omp_get_num_procs(), matrices = 24, repeats = 5;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) return usage();
    const std::string v = argv[++i];
    if (a == "--types") types = split_list(v);
    else if (a == "--batches") batches = parse_list<int>(v.c_str());
    else if (a == "--shapes") shapes = split_list(v);
    else if (a == "--threads") threads = std::atoi(v.c_str());
    else if (a == "--matrices") matrices = std::atoi(v.c_str());
    else if (a == "--repeats") repeats = std::atoi(v.c_str());
    else if (a == "--isa") {
      if (!bench::force_isa_flag(v)) return 2;
    } else {
      return usage();
    }
  }
  if (threads < 1 || matrices < 1 || repeats < 1 || batches.empty()) return usage();
  for (int b : batches)
    if (b < 1) return usage();
  for (const std::string& t : types)
    if (!find_type(t)) {
      std::fprintf(stderr, "--types: unknown type '%s' (q4_0, q4_k, q5_k, q6_k, q8_0)\n", t.c_str());
      return 2;
    }
  std::vector<Shape> parsed;
  for (const std::string& s : shapes) {
    Shape sh;
    if (!parse_shape(s, sh) || sh.k % 256 != 0) {
      std::fprintf(stderr, "--shapes: '%s' is not MxK with K a multiple of 256\n", s.c_str());
      return 2;
    }
    parsed.push_back(sh);
  }
  if (!kernels::quant_kernels_supported()) {
    std::fprintf(stderr, "quant_matmul_bench: this CPU lacks AVX2, FMA or F16C, which the products need\n");
    return 1;
  }
  omp_set_num_threads(threads);

  std::printf("# quant_matmul_bench on %s: %d threads, W over %d matrices, best of %d x 50 products\n",
              cpu_description().c_str(), threads, matrices, repeats);
  std::printf("%-5s %-10s %5s %8s %9s %6s %7s %8s\n", "type", "shape", "batch", "us", "GOP/s",
              "of_i8", "W GB/s", "path");
  double peaks[4] = {0, 0, 0, 0};  // by kernels::Isa
  for (int b : batches) {
    const kernels::Isa path = bench::path_at(b);
    peaks[int(path)] = std::max(peaks[int(path)], bench::measure_int8_peak(path));
  }
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  for (const std::string& tn : types) {
    const TypeName& t = *find_type(tn);
    for (const Shape& sh : parsed) {
      // One encoded W, packed into `matrices` buffers of their own.
      std::vector<float> wf(size_t(sh.m) * sh.k);
      for (float& v : wf) v = normal(rng);
      const size_t row = kernels::row_bytes(t.type, sh.k);
      std::vector<uint8_t> w(row * sh.m);
      for (int32_t r = 0; r < sh.m; ++r) t.encode(wf.data() + size_t(r) * sh.k, w.data() + r * row, size_t(sh.k));
      const size_t packed_bytes = kernels::packed_weight_bytes(t.type, sh.m, sh.k);
      std::vector<std::vector<uint8_t>> packed(size_t(matrices), std::vector<uint8_t>(packed_bytes, 0));
      for (auto& p : packed) kernels::pack_weights(t.type, w.data(), sh.m, sh.k, p.data());
      for (int batch : batches) {
        std::vector<float> x(size_t(batch) * sh.k), y(size_t(batch) * sh.m);
        for (float& v : x) v = normal(rng) * 50.0f;
        kernels::QuantScratch scratch;
        auto product = [&](int i) {
          kernels::matmul_weights(t.type, x.data(), sh.k, batch, packed[size_t(i % matrices)].data(), sh.m,
                                  sh.k, y.data(), sh.m, false, scratch);
        };
        for (int i = 0; i < 2 * matrices; ++i) product(i);  // warm up (and fault the pages in)
        constexpr int kProducts = 50;
        double best = 1e30;
        for (int rep = 0; rep < repeats; ++rep) {
          const double t0 = now_s();
          for (int i = 0; i < kProducts; ++i) product(i);
          best = std::min(best, (now_s() - t0) / kProducts);
        }
        // The peak right after the timing, against the best seen for this
        // path in the run: the machine's noise only ever lowers a reading.
        const kernels::Isa path = bench::path_at(batch);
        double& peak = peaks[int(path)];
        peak = std::max(peak, bench::measure_int8_peak(path));
        const double ops = 2.0 * batch * sh.m * double(sh.k);
        char shape[32];
        std::snprintf(shape, sizeof shape, "%dx%d", sh.m, sh.k);
        std::printf("%-5s %-10s %5d %8.1f %9.1f %5.0f%% %7.1f %8s\n", t.name, shape, batch, best * 1e6,
                    ops / best * 1e-9, 100.0 * ops / best / peak, double(packed_bytes) / best * 1e-9,
                    kernels::isa_name(path));
      }
    }
  }
  for (kernels::Isa isa : {kernels::Isa::avx2, kernels::Isa::avxvnni, kernels::Isa::avx512, kernels::Isa::amx})
    if (peaks[int(isa)] > 0)
      std::printf("# int8 peak %s: %.1f GOP/s (%s, %d threads)\n", kernels::isa_name(isa), peaks[int(isa)] * 1e-9,
                  bench::int8_instruction(isa), threads);
  return 0;
}
