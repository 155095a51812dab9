// Do swap copies overlap the forward pass on a GPU? A swap-heavy workload on
// the CUDA backend, timed with CUDA events (backends/cuda/cuda_util.hpp's Timeline).
//
//   swap_overlap_bench [--model dummy:llama-110m] [--batch 32] [--steps 64]
//                      [--swap-blocks 64] [--device cuda:0]
//
// `batch` sequences decode `steps` steps (greedy, context 128) on the CUDA
// runner's compute stream. First alone (the baseline); then again while a
// second thread keeps the swap engine busy: orders of `swap-blocks` KV
// blocks out to pinned host memory and back in, one after the other, on
// blocks no decoding sequence uses (as the scheduler orders them). The
// runner records each step's device work and the swap engine each order's
// copies as event pairs; the benchmark prints
//   overlap = (copy time during which the compute stream was busy) / (copy time)
// the copies' bandwidth, and the step time with and without copies running.
// Built only with CUDA; needs a device.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "backends/backend.hpp"
#include "backends/cuda/cuda_runner.hpp"
#include "backends/cuda/cuda_util.hpp"
#include "bench/bench_util.hpp"

using namespace conveyor;
using Lane = cuda::Timeline::Lane;

namespace {

int fail(const std::string& m) {
  std::fprintf(stderr, "swap_overlap_bench: %s\n", m.c_str());
  return 1;
}

constexpr int32_t kBlock = 16;
constexpr int32_t kContext = 128;

// The length of `spans` of `lane` covered by the union of the compute spans.
double covered_ms(const std::vector<cuda::Timeline::Span>& spans, Lane lane, double* total_ms) {
  std::vector<std::pair<double, double>> compute;
  for (const auto& s : spans)
    if (s.lane == Lane::compute) compute.emplace_back(s.start_ms, s.end_ms);
  std::sort(compute.begin(), compute.end());
  double covered = 0;
  *total_ms = 0;
  for (const auto& s : spans) {
    if (s.lane != lane) continue;
    *total_ms += s.end_ms - s.start_ms;
    for (const auto& [a, b] : compute) covered += std::max(0.0, std::min(b, s.end_ms) - std::max(a, s.start_ms));
  }
  return covered;
}

}  // namespace

int main(int argc, char** argv) {
  std::string model = "dummy:llama-110m", device = "cuda:0";
  int batch = 32, steps = 64, swap_blocks = 64;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string f = argv[i], v = argv[i + 1];
    if (f == "--model") model = v;
    else if (f == "--device") device = v;
    else if (f == "--batch") batch = std::max(1, std::atoi(v.c_str()));
    else if (f == "--steps") steps = std::max(1, std::atoi(v.c_str()));
    else if (f == "--swap-blocks") swap_blocks = std::max(1, std::atoi(v.c_str()));
    else return fail("unknown flag " + f);
  }
  auto spec = parse_device(device);
  if (!spec || spec->kind != DeviceKind::cuda) return fail("--device must be cuda or cuda:N");
  if (Status s = check_device(*spec); !s) return fail(s.error().message);
  auto loaded = load_model(model);
  if (!loaded) return fail(loaded.error().message);
  const int32_t per_seq = (kContext + 2 * steps + kBlock) / kBlock;
  const int32_t spare_first = batch * per_seq;  // blocks the swaps use
  EngineConfig c;
  c.device = *spec;
  c.kv_cache_tokens = int64_t(spare_first + swap_blocks) * kBlock;
  c.swap_space_tokens = int64_t(swap_blocks) * kBlock;
  c.max_num_seqs = batch;
  c.kv_cache_dtype = KvDtype::bf16;
  auto backend = make_cuda_backend(c, std::move(loaded).value());
  if (!backend) return fail(backend.error().message);
  auto* runner = dynamic_cast<CudaStepRunner*>(backend->runner.get());
  auto* swap = dynamic_cast<CudaSwapEngine*>(backend->swap.get());
  if (!runner || !swap) return fail("not the CUDA backend");

  std::mt19937 rng(3);
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  greedy.max_tokens = 1 << 20;
  uint64_t iteration = 0;
  std::vector<std::vector<int32_t>> tables(static_cast<size_t>(batch));
  StepPlan prefill;
  for (int i = 0; i < batch; ++i) {
    for (int32_t k = 0; k < per_seq; ++k) tables[size_t(i)].push_back(i * per_seq + k);
    std::vector<int32_t> prompt(kContext);
    for (int32_t& t : prompt) t = int32_t(rng() % 1000) + 3;
    prefill.batch.add_sequence(prompt, 0, tables[size_t(i)], true, int32_t(prompt.size()));
    prefill.seq_ids.push_back(seq_id(i + 1));
    prefill.new_samplers.emplace_back(seq_id(i + 1), greedy);
    prefill.new_sampler_prompts.push_back(prompt);
  }
  prefill.iteration = iteration++;
  runner->run(prefill);
  int32_t pos = kContext;
  auto decode = [&](int n) {
    std::vector<double> times;
    for (int s = 0; s < n; ++s, ++pos) {
      StepPlan p;
      p.iteration = iteration++;
      const int32_t placeholder = -1;
      for (int i = 0; i < batch; ++i) {
        p.batch.add_sequence(std::span(&placeholder, 1), pos,
                             std::span(tables[size_t(i)]).first(size_t(pos / kBlock + 1)), true);
        p.seq_ids.push_back(seq_id(i + 1));
      }
      const double start = now_s();
      runner->run(p);
      times.push_back(now_s() - start);
    }
    return median(times);
  };
  decode(4);  // warm up
  const double alone = decode(steps);

  auto timeline = std::make_shared<cuda::Timeline>();
  runner->set_timeline(timeline);
  swap->set_timeline(timeline);
  std::atomic<bool> stop{false};
  int orders = 0;
  std::thread swapper([&] {
    SwapOrder out{0, SwapDirection::out, {}}, in{0, SwapDirection::in, {}};
    for (int b = 0; b < swap_blocks; ++b) {
      out.blocks.emplace_back(spare_first + b, b);
      in.blocks.emplace_back(b, spare_first + b);
    }
    while (!stop.load()) {
      copy_and_wait(*swap, out);
      copy_and_wait(*swap, in);
      orders += 2;
    }
  });
  const double busy = decode(steps);
  stop = true;
  swapper.join();
  runner->set_timeline(nullptr);
  swap->set_timeline(nullptr);

  const auto spans = timeline->spans();
  double out_ms = 0, in_ms = 0;
  const double out_cov = covered_ms(spans, Lane::to_host, &out_ms), in_cov = covered_ms(spans, Lane::to_device, &in_ms);
  const double block_bytes = double(backend->capacity.bytes) / double(backend->capacity.tokens / kBlock);
  const double copied = double(orders / 2) * swap_blocks * block_bytes;
  std::printf("%s on %s, batch %d, context %d, %d-block orders (%.1f MiB each)\n", model.c_str(), device.c_str(),
              batch, kContext, swap_blocks, swap_blocks * block_bytes / (1 << 20));
  std::printf("step median: %.3f ms alone, %.3f ms with copies running (x%.3f)\n", alone * 1e3, busy * 1e3,
              busy / alone);
  std::printf("copies: %d orders, out %.1f ms (%.1f GB/s), in %.1f ms (%.1f GB/s)\n", orders, out_ms,
              out_ms > 0 ? copied / (out_ms * 1e6) : 0.0, in_ms, in_ms > 0 ? copied / (in_ms * 1e6) : 0.0);
  std::printf("overlap: %.1f%% of copy time ran while the compute stream worked (out %.1f%%, in %.1f%%)\n",
              out_ms + in_ms > 0 ? 100.0 * (out_cov + in_cov) / (out_ms + in_ms) : 0.0,
              out_ms > 0 ? 100.0 * out_cov / out_ms : 0.0, in_ms > 0 ? 100.0 * in_cov / in_ms : 0.0);
  return 0;
}
