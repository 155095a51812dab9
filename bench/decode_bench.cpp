// Decode throughput of the paged forward pass against the machine's roofline.
//
//   decode_bench [--models dummy:llama-15m,dummy:llama-110m] [--batches 1,8,16,32,64]
//                [--types f32,bf16,q8_0,q4_k_m] [--steps 16] [--repeats 3] [--context 128]
//                [--threads 2] [--block-size 16] [--kv-cache-dtype f32|f16|bf16|q8_0]
//                [--isa avx2|avxvnni|avx512|amx]
//
// --types runs each model with its matrices stored as each of these GGUF file
// types (conveyor convert's names): the float32 weights are written as a GGUF
// file of that type in memory (llama.cpp's tensor-type mix for q4_k_m and
// q5_k_m) and loaded back as `conveyor serve` loads a file, so the products
// run on the encoded weights. The weight bytes of the roofline are the bytes
// that a step reads in that encoding.
//
// For each model and batch size B it prefills B sequences to about `context`
// positions, then times decode steps (every sequence one token). The roofline
// is measured in the same run, right before and after every batch size's
// timing, keeping the better: memory read bandwidth by a multi-threaded
// streaming read of a buffer far larger than the last-level cache, and the
// matrix-product peak by a large sgemm through the BLAS in ConveyorBlas.cmake. Each batch size runs
// `repeats` times `steps` decode steps and keeps the run with the best median.
//   roofline(step) = max(weight bytes / bandwidth, flops / peak)
//   flops = 2 · (parameters in matrix products) · B + attention flops
// and `of_roof` is roofline / measured. `floor_ms` is the bandwidth floor
// alone (weight bytes / bandwidth) and `x_floor` the step time over it; the
// compute roof uses the float32 sgemm peak, which does not bound the int8
// products of the quantized types. `kv_roof` adds the KV-cache bytes a
// step reads to the weight bytes: attention at long contexts is memory-bound
// too, and the plain roofline does not count it. The KV cache is float32
// unless --kv-cache-dtype says otherwise (the server's default is bf16 or f16).
// `mm_GOP/s` is the layers' products alone and `of_i8` their share of the int8
// peak of the path that ran (bench/int8_peak.hpp, measured with the roofline);
// bench/quant_matmul_bench times the products one shape at a time.
#include <immintrin.h>
#include <omp.h>
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "bench/int8_peak.hpp"
#include "bench/isa_flag.hpp"
#include "kernels/cpu/matmul.hpp"
#include "kernels/cpu/matmul_blas.hpp"
#include "kernels/cpu/quant_matmul.hpp"
#include "model/batch.hpp"
#include "model/formats/gguf_llama.hpp"
#include "model/formats/gguf_writer.hpp"
#include "model/formats/loader.hpp"
#include "backends/cpu/transformer.hpp"
#include "model/kv_cache.hpp"
#include "bench_util.hpp"

namespace conveyor {
namespace {

using bench::int8_instruction;
using bench::measure_int8_peak;
using bench::path_at;

// Read bandwidth in bytes/s: every thread sums its share of a 512 MiB buffer
// (16 times the last-level cache).
double measure_read_bandwidth() {
  typedef float f32x16 __attribute__((vector_size(64)));
  const size_t bytes = size_t(1) << 29, n = bytes / sizeof(f32x16);
  // On transparent huge pages, as the model's weights and KV cache are.
  f32x16* buf = static_cast<f32x16*>(std::aligned_alloc(size_t(2) << 20, bytes));
  madvise(buf, bytes, MADV_HUGEPAGE);
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; ++i) buf[i] = f32x16{} + 1.0f;  // first touch by the reading thread
  std::vector<double> times;
  float sink = 0.0f;
  for (int rep = 0; rep < 5; ++rep) {
    const double t0 = now_s();
    float total = 0.0f;
#pragma omp parallel reduction(+ : total)
    {
      f32x16 a0{}, a1{}, a2{}, a3{};
#pragma omp for schedule(static) nowait
      for (size_t i = 0; i < n; i += 4) {
        a0 += buf[i];
        a1 += buf[i + 1];
        a2 += buf[i + 2];
        a3 += buf[i + 3];
      }
      const f32x16 a = a0 + a1 + a2 + a3;
      for (int j = 0; j < 16; ++j) total += a[j];
    }
    times.push_back(now_s() - t0);
    sink += total;
  }
  std::free(buf);
  if (sink == 42.0f) std::printf(" ");  // keep the sums alive
  // The best run: a roofline is an upper bound, and on a shared machine the
  // slower runs measure the neighbours.
  return double(bytes) / *std::min_element(times.begin(), times.end());
}

// Matrix-product peak in flop/s: the best of several 2048³ sgemms through BLAS, and through the
// packed kernel the forward pass uses (reported for comparison).
std::pair<double, double> measure_peak() {
  const int n = 2048;
  std::vector<float> a(size_t(n) * n, 0.5f), b(size_t(n) * n, 0.25f), c(size_t(n) * n);
  std::vector<float> packed(kernels::packed_matrix_floats(n, n));
  kernels::pack_matrix(b.data(), n, n, packed.data());
  std::vector<double> blas, own;
  for (int rep = 0; rep < 4; ++rep) {
    double t0 = now_s();
    kernels::matmul_blas(a.data(), n, n, b.data(), n, n, c.data(), n);
    blas.push_back(now_s() - t0);
    t0 = now_s();
    kernels::matmul_packed(a.data(), n, n, packed.data(), n, n, c.data(), n);
    own.push_back(now_s() - t0);
  }
  const double flops = 2.0 * n * n * n;
  return {flops / *std::min_element(blas.begin(), blas.end()),
          flops / *std::min_element(own.begin(), own.end())};
}

// The machine's limits. The memory bandwidth this VM gets from its host moves
// between ~33 and ~62 GB/s over minutes, so each batch size is compared with
// the limits measured right before and right after its timing (the better of
// the two); the header line shows the best seen in the whole run.
struct Roofline {
  double bandwidth = 0.0;    // bytes/s
  double blas_peak = 0.0;    // flop/s, the peak the roofline uses
  double packed_peak = 0.0;  // flop/s, for comparison
  double int8_peak = 0.0;    // int ops/s of the quantized products' vector instruction
  double amx_peak = 0.0;     // the same for AMX tiles, where the kernels use them
  static Roofline measure() {
    Roofline r;
    r.bandwidth = measure_read_bandwidth();
    std::tie(r.blas_peak, r.packed_peak) = measure_peak();
    r.int8_peak = measure_int8_peak(path_at(1));
    if (kernels::active_isa() == kernels::Isa::amx) r.amx_peak = measure_int8_peak(kernels::Isa::amx);
    return r;
  }
  void keep_best(const Roofline& o) {
    bandwidth = std::max(bandwidth, o.bandwidth);
    blas_peak = std::max(blas_peak, o.blas_peak);
    packed_peak = std::max(packed_peak, o.packed_peak);
    int8_peak = std::max(int8_peak, o.int8_peak);
    amx_peak = std::max(amx_peak, o.amx_peak);
  }
  double peak_at(int batch_size) const {
    return path_at(batch_size) == kernels::Isa::amx ? amx_peak : int8_peak;
  }
};

// One batch size's measurement.
struct Result {
  int batch_size;
  double step_s, flops, kv_bytes, prefill_tokens_per_s;
  ForwardProfile profile;  // of the median step
  Roofline roof;           // measured around this batch size's timing
};

int64_t matmul_params(const ModelConfig& c) {
  const int64_t d = c.dim, q = int64_t(c.n_heads) * c.head_dim(), kv = c.kv_dim(), h = c.hidden_dim;
  return c.n_layers * (q * d + 2 * kv * d + d * q + 3 * h * d) + int64_t(c.vocab_size) * d;
}

struct Options {
  std::vector<std::string> models = {"dummy:llama-15m", "dummy:llama-110m"};
  std::vector<std::string> types = {"f32"};
  std::vector<int> batches = {1, 8, 16, 32, 64};
  int steps = 16, repeats = 3, context = 128, threads = 2, block_size = 16;
  KvDtype kv_dtype = KvDtype::f32;
};

[[noreturn]] void fail(const std::string& what, const Error& e) {
  std::fprintf(stderr, "%s: %s\n", what.c_str(), e.message.c_str());
  std::exit(1);
}

// `model` with its matrices encoded as GGUF file type `type`, through an
// in-memory GGUF file, as a served file is loaded.
LoadedModel encoded_as(const LoadedModel& model, const std::string& type) {
  auto file_type = parse_gguf_file_type(type);
  if (!file_type) fail(type, file_type.error());
  GgufWriteOptions options;
  options.file_type = *file_type;
  auto bytes = serialize_gguf(model, options);
  if (!bytes) fail(type, bytes.error());
  auto storage = std::make_shared<const std::vector<uint8_t>>(std::move(bytes).value());
  auto file = parse_gguf(*storage, model.source + " as " + type);
  if (!file) fail(type, file.error());
  file->storage = storage;
  auto back = llama_from_gguf(*file);
  if (!back) fail(type, back.error());
  return std::move(back).value();
}

void run_model(const std::string& spec, const std::string& type, const Options& o,
               Roofline& best) {
  // Every core builds and encodes the weights (minutes for a 0.8B model on
  // two); the steps run on o.threads.
  omp_set_num_threads(omp_get_num_procs());
  auto loaded = load_model(spec);
  if (!loaded) fail(spec, loaded.error());
  if (type != "f32") loaded = encoded_as(*loaded, type);
  omp_set_num_threads(o.threads);
  const ModelConfig config = loaded->config;
  const int64_t params = matmul_params(config);
  Transformer model(config, std::move(loaded->weights), o.threads);
  const double weight_bytes = double(model.weight_bytes());
  std::vector<Result> results;
  std::mt19937 rng(1);
  for (int batch_size : o.batches) {
    const int32_t max_len = o.context + 1;
    const int32_t blocks_per_seq = (max_len + o.block_size - 1) / o.block_size;
    KvCache cache(KvCacheShape::for_model(config, o.block_size, blocks_per_seq * batch_size, o.kv_dtype));
    // Prompts of context-16 .. context tokens; blocks handed out in order.
    std::vector<std::vector<int32_t>> tokens(static_cast<size_t>(batch_size)),
        tables(static_cast<size_t>(batch_size));
    for (int s = 0; s < batch_size; ++s) {
      tokens[s].resize(size_t(std::uniform_int_distribution<int>(o.context - 16, o.context - 1)(rng)));
      for (int32_t& t : tokens[s]) t = std::uniform_int_distribution<int>(0, config.vocab_size - 1)(rng);
      for (int b = 0; b < blocks_per_seq; ++b) tables[s].push_back(s * blocks_per_seq + b);
    }
    ForwardBatch batch;
    std::vector<float> logits;
    // Prefill in chunks of 64 tokens per sequence, up to 512 tokens per call.
    std::vector<int32_t> done(size_t(batch_size), 0);
    double prefill_s = 0.0;
    int64_t prefill_tokens = 0;
    for (bool more = true; more;) {
      more = false;
      batch.clear();
      for (int s = 0; s < batch_size && batch.num_tokens() < 512; ++s) {
        const int32_t n = std::min<int32_t>(64, int32_t(tokens[s].size()) - done[s]);
        if (n <= 0) continue;
        batch.add_sequence({tokens[s].data() + done[s], size_t(n)}, done[s], tables[s],
                           done[s] + n == int32_t(tokens[s].size()), int32_t(tokens[s].size()));
        done[s] += n;
        more = true;
      }
      if (!more) break;
      const double t0 = now_s();
      model.forward(batch, cache, logits);
      prefill_s += now_s() - t0;
      prefill_tokens += batch.num_tokens();
    }
    Roofline roof = Roofline::measure();
    // Decode steps: `repeats` runs of `steps` steps; the run with the best
    // median counts (on a shared machine the others measure the neighbours).
    double step_s = 1e30, flops = 0.0, kv_bytes = 0.0;
    ForwardProfile best_profile;
    for (int run = 0; run < o.repeats; ++run) {
    std::vector<double> times;
    std::vector<std::pair<double, ForwardProfile>> profiles;  // per step
    double flops_sum = 0.0, kv_bytes_sum = 0.0;
    for (int step = 0; step < o.steps + 2; ++step) {
      batch.clear();
      double attn_flops = 0.0, kv_bytes = 0.0;
      // Every step decodes at the position after the prompt (rewriting that
      // slot), so the context, and the cost of a step, stay the same however
      // many steps run.
      for (int s = 0; s < batch_size; ++s) {
        const int32_t pos = int32_t(tokens[s].size());
        const int32_t next = (tokens[s].back() + step + 1) % config.vocab_size;
        batch.add_sequence({&next, 1}, pos, tables[s], true);
        // Scores and weighted values: 2 flops per head dimension per position, each.
        attn_flops += 4.0 * config.n_layers * config.n_heads * config.head_dim() * (pos + 1);
        kv_bytes += 2.0 * double(kernels::kv_bytes(o.kv_dtype, int64_t(config.n_layers) * config.kv_dim())) * (pos + 1);
      }
      ForwardProfile profile;
      model.set_profile(&profile);
      const double t0 = now_s();
      model.forward(batch, cache, logits);
      const double dt = now_s() - t0;
      if (step >= 2) {  // the first steps warm caches and thread pools
        times.push_back(dt);
        profiles.emplace_back(dt, profile);
        flops_sum += 2.0 * double(params) * batch_size + attn_flops;
        kv_bytes_sum += kv_bytes;
      }
    }
    model.set_profile(nullptr);
    if (median(times) < step_s) {
      step_s = median(times);
      flops = flops_sum / o.steps;
      kv_bytes = kv_bytes_sum / o.steps;
      // The phases of the median step.
      std::sort(profiles.begin(), profiles.end(),
                [](const auto& a, const auto& b) { return a.first < b.first; });
      best_profile = profiles[profiles.size() / 2].second;
    }
    }
    roof.keep_best(Roofline::measure());
    best.keep_best(roof);
    results.push_back(
        {batch_size, step_s, flops, kv_bytes, prefill_tokens / prefill_s, best_profile, roof});
  }

  std::printf("\n%s as %s: %.1fM parameters in matrix products (%.0f MB read per step, %s "
              "kernels), context ~%d, block size %d, KV cache %s\n",
              spec.c_str(), type.c_str(), params / 1e6, weight_bytes / 1e6,
              kernels::isa_name(kernels::active_isa()), o.context, o.block_size, to_string(o.kv_dtype));
  std::printf("best in this run: read bandwidth %.1f GB/s, sgemm peak %.1f GFLOP/s (BLAS; packed "
              "kernel %.1f), int8 peak %.1f GOP/s (%s)",
              best.bandwidth / 1e9, best.blas_peak / 1e9, best.packed_peak / 1e9, best.int8_peak / 1e9,
              int8_instruction(path_at(1)));
  if (best.amx_peak > 0) std::printf(", %.1f GOP/s (tdpbusd)", best.amx_peak / 1e9);
  std::printf("\n");
  // mm_GOP/s: the layers' products (the classifier apart) in the median
  // step; of_i8: that over the int8 peak measured around this batch size
  // (for the integer types; the float and half types do not use it), of
  // the instruction that `path` runs at this batch size.
  std::printf("%5s %10s %10s %6s %6s %9s %8s %10s %8s %8s %8s %10s %9s %6s %12s   %s\n", "batch",
              "step_ms", "tok/s", "GB/s", "GF/s", "floor_ms", "x_floor", "roof_ms", "bound",
              "of_roof", "kv_roof", "prefill/s", "mm_GOP/s", "of_i8", "path",
              "median step, ms: matmul attn logits other");
  for (const Result& r : results) {
    const Roofline& roof = r.roof;
    const double memory_s = weight_bytes / roof.bandwidth, compute_s = r.flops / roof.blas_peak;
    const double roof_s = std::max(memory_s, compute_s);
    const double kv_roof_s = std::max((weight_bytes + r.kv_bytes) / roof.bandwidth, compute_s);
    const ForwardProfile& p = r.profile;
    const double per_call = 1e3 / double(std::max<int64_t>(p.calls, 1));
    const double layer_ops = 2.0 * double(params - int64_t(config.vocab_size) * config.dim) * r.batch_size;
    const double mm_ops = p.matmul > 0 ? layer_ops / (p.matmul * per_call / 1e3) : 0;
    std::printf(
        "%5d %10.3f %10.1f %6.1f %6.0f %9.3f %7.2fx %10.3f %8s %7.0f%% %7.0f%% %10.0f %9.0f %5.0f%% "
        "%12s   %5.2f %5.2f %5.2f %5.2f\n",
                r.batch_size, r.step_s * 1e3, r.batch_size / r.step_s, roof.bandwidth / 1e9,
                roof.blas_peak / 1e9, memory_s * 1e3, r.step_s / memory_s, roof_s * 1e3,
                memory_s > compute_s ? "memory" : "compute", 100.0 * roof_s / r.step_s,
                100.0 * kv_roof_s / r.step_s, r.prefill_tokens_per_s, mm_ops / 1e9,
                100.0 * mm_ops / roof.peak_at(r.batch_size), kernels::isa_name(path_at(r.batch_size)),
                p.matmul * per_call,
                p.attention * per_call, p.logits * per_call, (p.norms + p.embed) * per_call);
  }
  std::fflush(stdout);
}

}  // namespace
}  // namespace conveyor

namespace {

constexpr const char* kUsage =
    "usage: decode_bench [--models dummy:llama-15m,dummy:llama-110m] [--batches 1,8,16,32,64]\n"
    "                    [--types f32,bf16,q8_0,q4_k_m] [--steps 16] [--repeats 3] [--context 128]\n"
    "                    [--threads 2] [--block-size 16] [--kv-cache-dtype f32|f16|bf16|q8_0]\n"
    "                    [--isa avx2|avxvnni|avx512|amx]\n";

}  // namespace

int main(int argc, char** argv) {
  conveyor::Options o;
  for (int i = 1; i < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (i + 1 == argc) {  // every flag takes a value
      std::fprintf(stderr, "%s needs a value\n%s", flag.c_str(), kUsage);
      return 2;
    }
    const std::string value = argv[i + 1];
    if (flag == "--models") o.models = split_list(value);
    else if (flag == "--types") o.types = split_list(value);
    else if (flag == "--batches") {
      o.batches.clear();
      for (const std::string& b : split_list(value)) o.batches.push_back(std::atoi(b.c_str()));
    } else if (flag == "--steps") o.steps = std::max(1, std::atoi(value.c_str()));
    else if (flag == "--repeats") o.repeats = std::max(1, std::atoi(value.c_str()));
    else if (flag == "--context") o.context = std::max(17, std::atoi(value.c_str()));
    else if (flag == "--threads") o.threads = std::max(1, std::atoi(value.c_str()));
    else if (flag == "--block-size") o.block_size = std::max(1, std::atoi(value.c_str()));
    else if (flag == "--kv-cache-dtype") {
      const auto d = conveyor::parse_kv_dtype(value);
      if (!d) {
        std::fprintf(stderr, "--kv-cache-dtype must be f32, f16, bf16 or q8_0, not '%s'\n", value.c_str());
        return 2;
      }
      o.kv_dtype = *d;
    } else if (flag == "--isa") {
      if (!conveyor::bench::force_isa_flag(value)) return 2;
    } else {
      std::fprintf(stderr, "unknown flag %s\n%s", flag.c_str(), kUsage);
      return 2;
    }
  }
  omp_set_num_threads(o.threads);
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // a killed run keeps what it printed, in a pipe too
  const char* wait = std::getenv("OMP_WAIT_POLICY");
  std::printf("%s; threads %d, OMP_WAIT_POLICY=%s\n", cpu_description().c_str(), o.threads, wait ? wait : "(unset)");
  conveyor::Roofline best;
  for (const std::string& spec : o.models)
    for (const std::string& type : o.types) conveyor::run_model(spec, type, o, best);
  return 0;
}
