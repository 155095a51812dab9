// engine_bench: the actor engine's figures, in-process, on a real model.
//
//   1. continuous versus static batching: 256 requests whose output lengths
//      are exponential (mean 128, capped at 1024), 32 sequences at a time;
//      the throughput ratio (target: 3x or more);
//   2. scheduler overhead: time per iteration outside the executor's forward
//      pass with 256 running sequences (target: < 50 us and < 2% of the
//      iteration), with the real model and with a zero-cost executor;
//   3. KV utilization: live tokens over the slots of allocated blocks,
//      averaged over the continuous run (target: 95% or more);
//   4. throughput under memory pressure with recompute, swap and cost.
//
// usage: engine_bench [--model dummy:llama-15m] [--requests 256] [--quick] [--overhead] [--zero-cost]
//                     [--closed-loop C] [--kv-cache-dtype auto|f32|f16|bf16|q8_0] [--core N]
// --core N times only the scheduler core and block manager for N decoding
// sequences, 20 runs of 1,000 iterations, each with its phases' times.
// The dummy model's context is raised to 2048 so that 1024-token outputs
// fit (random weights do not care where RoPE positions end).
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <functional>
#include <mutex>
#include <cstring>
#include <random>
#include <string>
#include <thread>

#include "actors/block_manager_actor.hpp"
#include "actors/engine.hpp"
#include "backends/cpu/transformer.hpp"
#include "tests/actors/engine_test_util.hpp"

namespace conveyor {
namespace {

using clock_type = std::chrono::steady_clock;

// --kv-cache-dtype: every engine and decode step of the run uses it.
std::optional<KvDtype> g_kv_dtype;  // auto

EngineConfig default_config() {
  EngineConfig c;
  c.kv_cache_dtype = g_kv_dtype;
  return c;
}

struct Workload {
  std::vector<std::vector<int32_t>> prompts;
  std::vector<int32_t> output_lengths;
  int64_t total_output() const {
    int64_t n = 0;
    for (int32_t x : output_lengths) n += x;
    return n;
  }
};

Workload long_tailed_workload(int n, int32_t prompt_len, int32_t vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::exponential_distribution<double> length(1.0 / 128.0);
  Workload w;
  for (int i = 0; i < n; ++i) {
    std::vector<int32_t> p(static_cast<size_t>(prompt_len));
    for (int32_t& t : p) t = 3 + int32_t(rng() % uint64_t(vocab - 3));
    w.prompts.push_back(std::move(p));
    w.output_lengths.push_back(std::clamp(int32_t(std::ceil(length(rng))), 1, 1024));
  }
  return w;
}

struct IdleQuantiles {
  double p50 = 0, p90 = 0;
  explicit IdleQuantiles(const EngineMetrics& m)
      : p50(m.executor_idle.quantile(0.5)), p90(m.executor_idle.quantile(0.9)) {}
  IdleQuantiles() = default;
};

struct RunResult {
  double seconds = 0;
  IdleQuantiles idle;
  int64_t tokens = 0;
  EngineStats stats;
  double tokens_per_second() const { return seconds > 0 ? double(tokens) / seconds : 0; }
};

RunResult run(Engine& engine, const Workload& w) {
  testing::Collector collector;
  const auto start = clock_type::now();
  for (size_t i = 0; i < w.prompts.size(); ++i)
    engine.submit(testing::greedy_spec(i + 1, w.prompts[i], w.output_lengths[i], true),
                  collector.callback_for(i + 1));
  collector.wait_for(w.prompts.size(), std::chrono::seconds(3600));
  RunResult r;
  r.seconds = std::chrono::duration<double>(clock_type::now() - start).count();
  for (const auto& [id, o] : collector.outcomes()) r.tokens += int64_t(o.tokens.size());
  r.stats = *engine.stats();
  r.idle = IdleQuantiles(engine.metrics());
  return r;
}

RunResult run_config(caf::actor_system& sys, const LoadedModel& model, const EngineConfig& config,
                     const Workload& w) {
  auto engine = Engine::create(sys, config, model);
  if (!engine) {
    std::fprintf(stderr, "engine_bench: %s\n", engine.error().message.c_str());
    std::exit(1);
  }
  return run(**engine, w);
}

double overhead_us(const EngineStats& s) {
  return s.iterations ? (s.iteration_seconds - s.forward_seconds) / double(s.iterations) * 1e6 : 0;
}

void print_breakdown(const EngineStats& s, const IdleQuantiles& idle) {
  const double n = double(std::max<uint64_t>(s.iterations, 1));
  std::printf("      the executor idle between steps: mean %.1f us, median %.1f us, p90 %.1f us\n",
              s.executor_idle_seconds / n * 1e6, idle.p50 * 1e6, idle.p90 * 1e6);
  std::printf("      critical path in the scheduler (step result in, next plan out): %.1f us, of which "
              "the block manager round trip %.1f us; hops: plan to executor %.1f us, result back %.1f us\n",
              s.critical_seconds / n * 1e6, s.block_manager_seconds / n * 1e6,
              s.plan_hop_seconds / n * 1e6, s.result_hop_seconds / n * 1e6);
  std::printf("      the scheduler's handlers in all: %.1f us, of which streaming tokens to the stream "
              "actors %.1f us (after the next step is dispatched)\n",
              s.scheduler_seconds / n * 1e6, s.delivery_seconds / n * 1e6);
}

// A runner that does no work: every sequence samples token 5.
class ZeroCostRunner final : public StepRunner {
 public:
  StepResult run(StepPlan& plan) override {
    StepResult r;
    r.iteration = plan.iteration;
    for (int32_t s = 0; s < plan.batch.num_seqs(); ++s)
      if (plan.batch.want_logits[s]) r.tokens.push_back(SampledToken{plan.seq_ids[s], {5, 0.0f, {}}});
    return r;
  }
  void reset() override {}
};

// Closed loop at `concurrency`: each finished request is replaced by a new
// one until `total` have run (what `conveyor bench --concurrency` does over
// HTTP). Returns output tokens per second.
double closed_loop(Engine& engine, int concurrency, int total, int32_t prompt_len, int32_t output_len,
                   int32_t vocab) {
  std::mutex mutex;
  std::condition_variable cv;
  int submitted = 0, finished = 0;
  int64_t tokens = 0;
  std::mt19937_64 rng(5);
  std::function<void()> submit_one = [&] {  // called with `mutex` held
    std::vector<int32_t> prompt(static_cast<size_t>(prompt_len));
    for (int32_t& t : prompt) t = 3 + int32_t(rng() % uint64_t(std::min(vocab, 250) - 3));
    RequestSpec spec = testing::greedy_spec(0, std::move(prompt), output_len, true);
    ++submitted;
    engine.submit(std::move(spec), [&](const StreamEvent& e) {
      std::lock_guard lock(mutex);
      tokens += int64_t(e.token_ids.size());
      if (!e.last()) return;
      ++finished;
      if (submitted < total) submit_one();
      cv.notify_all();
    });
  };
  const auto start = clock_type::now();
  {
    std::lock_guard lock(mutex);
    for (int i = 0; i < concurrency && submitted < total; ++i) submit_one();
  }
  std::unique_lock lock(mutex);
  cv.wait(lock, [&] { return finished == total; });
  return double(tokens) / std::chrono::duration<double>(clock_type::now() - start).count();
}

// Decode step time of the forward pass alone at batch `b` (context ~64), ms.
double decode_step_ms(const LoadedModel& model, int b) {
  Transformer t(model.config, model.weights, 0);
  const int32_t bs = 16, ctx = 64, per_seq = ctx / bs + 1;
  KvCache kv(KvCacheShape::for_model(model.config, bs, b * per_seq, kv_dtype_of(default_config())));
  ForwardBatch batch;
  std::vector<float> logits;
  std::vector<int32_t> prompt(size_t(ctx), 7);
  auto table = [&](int s) {
    std::vector<int32_t> t(static_cast<size_t>(per_seq));
    for (int i = 0; i < per_seq; ++i) t[size_t(i)] = s * per_seq + i;
    return t;
  };
  for (int s = 0; s < b; ++s) batch.add_sequence(prompt, 0, table(s), true, int32_t(prompt.size()));
  t.forward(batch, kv, logits);
  std::vector<double> times;
  for (int step = 0; step < 9; ++step) {
    batch.clear();
    const int32_t token = 9;
    for (int s = 0; s < b; ++s) batch.add_sequence(std::span(&token, 1), ctx + step % 8, table(s), true);
    const auto start = clock_type::now();
    t.forward(batch, kv, logits);
    times.push_back(std::chrono::duration<double>(clock_type::now() - start).count() * 1e3);
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

// The throughput ratio continuous/static that decode step costs allow for
// this workload: step cost interpolated linearly between batch 1 and 32,
// prefill ignored; `padded`: a static batch keeps every row until it ends. On a GPU a step costs about the same at any batch size and
// the ratio approaches max/mean output length; on a CPU larger batches cost
// more and the ceiling is lower.
double ratio_ceiling(const Workload& w, int slots, double c1, double cmax, bool padded = false) {
  auto cost = [&](int b) { return b <= 0 ? 0.0 : c1 + (cmax - c1) * double(b - 1) / double(slots - 1); };
  double static_ms = 0;
  for (size_t i = 0; i < w.output_lengths.size(); i += size_t(slots)) {
    const size_t end = std::min(w.output_lengths.size(), i + size_t(slots));
    const int32_t longest = *std::max_element(w.output_lengths.begin() + long(i), w.output_lengths.begin() + long(end));
    for (int32_t t = 0; t < longest; ++t) {
      int active = 0;
      for (size_t j = i; j < end; ++j) active += padded || w.output_lengths[j] > t ? 1 : 0;
      static_ms += cost(active);
    }
  }
  double continuous_ms = 0;
  std::vector<int32_t> left;
  size_t next = 0;
  while (next < w.output_lengths.size() || !left.empty()) {
    while (int(left.size()) < slots && next < w.output_lengths.size()) left.push_back(w.output_lengths[next++]);
    continuous_ms += cost(int(left.size()));
    for (int32_t& l : left) --l;
    std::erase_if(left, [](int32_t l) { return l <= 0; });
  }
  return static_ms / continuous_ms;
}

// Microseconds an iteration spends in each phase of the scheduler core and
// the block manager (core_cpu_us, for profiling).
struct CorePhases {
  static constexpr int kCount = 7;
  static constexpr const char* kNames[kCount] = {"admission",  "build_allocation", "block_manager",
                                                 "apply_allocation", "build_step", "runner", "apply_step"};
  double us[kCount] = {};
};

// The scheduler core and block manager alone, no actors: the CPU cost of one
// decode iteration's bookkeeping for n running sequences, in microseconds,
// and (into `phases`, when given) its split between the phases.
double core_cpu_us(int n, int32_t vocab, CorePhases* phases = nullptr) {
  SchedulerConfig c;
  c.block_size = 16;
  c.num_blocks = n * 80;
  c.max_num_seqs = n;
  c.max_batched_tokens = 8192;
  c.context_length = 4096;
  c.vocab_size = vocab;
  SchedulerCore core(c);
  BlockManager bm(c.num_blocks, c.block_size, true, 0);
  auto admission = make_admission_policy(AdmissionMode::watermark);
  ZeroCostRunner runner;
  std::vector<TokenEvent> events;
  for (int i = 0; i < n; ++i) {
    GenerateRequest r;
    r.id = uint64_t(i + 1);
    r.prompt.assign(16, 3 + i % 100);
    r.sampling.max_tokens = 1200;
    r.sampling.ignore_eos = true;
    (void)core.submit(std::move(r), 0.0);
  }
  CorePhases sums;
  auto iterate = [&] {
    clock_type::time_point t[CorePhases::kCount + 1];
    t[0] = clock_type::now();
    if (auto q = core.begin_iteration(0.0)) core.apply_admission((*admission)(*q));
    t[1] = clock_type::now();
    AllocationBatch batch = core.build_allocation();
    t[2] = clock_type::now();
    AllocationResult granted = apply_allocation_batch(bm, batch);
    t[3] = clock_type::now();
    (void)core.apply_allocation(granted);
    t[4] = clock_type::now();
    StepPlan plan = core.build_step();
    t[5] = clock_type::now();
    StepResult result = runner.run(plan);
    t[6] = clock_type::now();
    core.apply_step(result, 0.0);
    core.take_events(events);
    t[7] = clock_type::now();
    for (int p = 0; p < CorePhases::kCount; ++p)
      sums.us[p] += std::chrono::duration<double, std::micro>(t[p + 1] - t[p]).count();
  };
  for (int i = 0; i < 10; ++i) iterate();  // admit and prefill
  sums = {};
  const int iterations = 1000;
  const auto start = clock_type::now();
  for (int i = 0; i < iterations; ++i) iterate();
  if (phases != nullptr)
    for (int p = 0; p < CorePhases::kCount; ++p) phases->us[p] = sums.us[p] / iterations;
  return std::chrono::duration<double>(clock_type::now() - start).count() / iterations * 1e6;
}

}  // namespace
}  // namespace conveyor

int main(int argc, char** argv) {
  using namespace conveyor;
  std::string model_name = "dummy:llama-15m";
  int requests = 256;
  bool overhead_only = false;
  bool zero_cost_only = false;  // --zero-cost: only the zero-cost executor's figure (for profiling)
  int closed = 0;  // --closed-loop C: only the closed-loop figure
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--model") && i + 1 < argc) model_name = argv[++i];
    else if (!std::strcmp(argv[i], "--requests") && i + 1 < argc) requests = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--quick")) requests = 64;
    else if (!std::strcmp(argv[i], "--overhead")) overhead_only = true;
    else if (!std::strcmp(argv[i], "--zero-cost")) overhead_only = zero_cost_only = true;
    else if (!std::strcmp(argv[i], "--core")) {  // only the scheduler core's CPU cost, for N sequences (profiling)
      const int n = i + 1 < argc ? std::atoi(argv[i + 1]) : 256;
      const int seqs = n > 0 ? n : 256;
      for (int k = 0; k < 20 * std::max(1, 256 / seqs); ++k) {
        CorePhases phases;
        std::printf("%.1f us", core_cpu_us(seqs, 32000, &phases));
        for (int p = 0; p < CorePhases::kCount; ++p) std::printf("  %s %.2f", CorePhases::kNames[p], phases.us[p]);
        std::printf("\n");
      }
      return 0;
    }
    else if (!std::strcmp(argv[i], "--closed-loop") && i + 1 < argc) closed = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--kv-cache-dtype") && i + 1 < argc) {
      auto d = parse_kv_cache_dtype(argv[++i]);
      if (!d) {
        std::fprintf(stderr, "--kv-cache-dtype: %s\n", d.error().message.c_str());
        return 2;
      }
      g_kv_dtype = *d;
    }
    else {
      std::fprintf(stderr, "usage: engine_bench [--model M] [--requests N] [--quick] [--overhead] [--zero-cost] [--closed-loop C] "
                   "[--kv-cache-dtype D] [--core N]\n");
      return 2;
    }
  }
  if (Status s = validate(default_config()); !s) {
    std::fprintf(stderr, "engine_bench: %s\n", s.error().message.c_str());
    return 2;
  }
  auto loaded = load_model(model_name);
  if (!loaded) {
    std::fprintf(stderr, "engine_bench: %s\n", loaded.error().message.c_str());
    return 1;
  }
  LoadedModel model = std::move(loaded).value();
  model.config.context_length = std::max(model.config.context_length, 2048);
  const int32_t vocab = model.config.vocab_size;
  std::printf("model %s: dim %d, %d layers, vocab %d; %u hardware threads; KV cache %s\n", model_name.c_str(),
              model.config.dim, model.config.n_layers, vocab, std::thread::hardware_concurrency(),
              to_string(kv_dtype_of(default_config())));

  testing::EngineSystemConfig cfg;
  caf::actor_system sys{cfg};
  if (closed > 0) {
    // The server comparison's workload: 128-token prompts, 128 new tokens,
    // `conveyor serve`'s default engine configuration.
    auto engine = Engine::create(sys, default_config(), model);
    if (!engine) return 1;
    const int total = std::max(requests, 2 * closed);
    const double tps = closed_loop(**engine, closed, total, 128, 128, vocab);
    const EngineStats st = *(*engine)->stats();
    const double n = double(std::max<uint64_t>(st.iterations, 1));
    std::printf("   per iteration: %.0f us, of which %.0f us in the forward pass and sampling\n",
                st.iteration_seconds / n * 1e6, st.forward_seconds / n * 1e6);
    print_breakdown(st, IdleQuantiles((*engine)->metrics()));
    std::printf("in-process closed loop, concurrency %d, %d requests (128 in, 128 out): %.1f output tok/s\n",
                closed, total, tps);
    return 0;
  }
  const Workload chat = long_tailed_workload(requests, 32, vocab, 1);
  std::printf("workload: %d requests, 32-token prompts, output exponential mean 128 capped at 1024 "
              "(total %lld output tokens)\n\n", requests, (long long)chat.total_output());

  EngineConfig base = default_config();
  base.max_num_seqs = 32;
  base.max_batched_tokens = 2048;
  base.kv_cache_tokens = 32 * 1152;
  base.block_size = 16;
  RunResult cont;
  if (!overhead_only) {
  // 1 + 3: continuous versus static, 32 sequences at a time, ample KV.
  // Two baselines: static (a batch's finished members leave its forward
  // passes) and static-padded (they keep their rows until the batch ends, the
  // fixed batch shape of request-level batching systems).
  EngineConfig static_config = base;
  static_config.batching = BatchingMode::static_;
  EngineConfig padded_config = base;
  padded_config.batching = BatchingMode::static_padded;
  cont = run_config(sys, model, base, chat);
  const RunResult stat = run_config(sys, model, static_config, chat);
  const RunResult padded = run_config(sys, model, padded_config, chat);
  std::printf("1. continuous vs static batching (max 32 sequences)\n");
  std::printf("   continuous     %8.1f tok/s  %7.2f s  %6llu iterations\n", cont.tokens_per_second(),
              cont.seconds, (unsigned long long)cont.stats.iterations);
  std::printf("   static         %8.1f tok/s  %7.2f s  %6llu iterations\n", stat.tokens_per_second(),
              stat.seconds, (unsigned long long)stat.stats.iterations);
  std::printf("   static-padded  %8.1f tok/s  %7.2f s  %6llu iterations\n", padded.tokens_per_second(),
              padded.seconds, (unsigned long long)padded.stats.iterations);
  std::printf("   ratio vs static %.2fx, vs static-padded %.2fx   (target >= 3x)\n",
              cont.tokens_per_second() / std::max(stat.tokens_per_second(), 1e-9),
              cont.tokens_per_second() / std::max(padded.tokens_per_second(), 1e-9));
  const double c1 = decode_step_ms(model, 1), c32 = decode_step_ms(model, 32);
  std::printf("   decode step: %.2f ms at batch 1, %.2f ms at batch 32; the ratio these costs allow "
              "for this workload: vs static %.2fx, vs static-padded %.2fx (with equal step costs, as "
              "on a GPU, both: %.2fx)\n\n",
              c1, c32, ratio_ceiling(chat, 32, c1, c32), ratio_ceiling(chat, 32, c1, c32, true),
              ratio_ceiling(chat, 32, 1.0, 1.0));

  std::printf("3. KV utilization (live tokens / slots of allocated blocks, averaged over iterations)\n");
  std::printf("   block 16, continuous run above: %.1f%%  (target >= 95%%)\n",
              100.0 * cont.stats.kv_live_token_ratio);
  for (int32_t bs : {8, 32}) {
    EngineConfig c = base;
    c.block_size = bs;
    const RunResult r = run_config(sys, model, c, chat);
    std::printf("   block %2d:                       %.1f%%\n", bs, 100.0 * r.stats.kv_live_token_ratio);
  }
  std::printf("\n");
  }

  // 2: scheduler overhead with 256 running sequences.
  std::printf("2. scheduler overhead per iteration, 256 running sequences (target < 50 us and < 2%%)\n");
  std::printf("   scheduler core + block manager alone (no actors): %.1f us per decode iteration\n",
              core_cpu_us(256, vocab));
  {
    Workload w = long_tailed_workload(256, 16, vocab, 2);
    std::fill(w.output_lengths.begin(), w.output_lengths.end(), 64);
    EngineConfig c = base;
    c.max_num_seqs = 256;
    c.kv_cache_tokens = 256 * 2048;
    // Planning ahead (the default) against one step at a time, interleaved.
    for (bool overlap : {true, false, true, false}) {
      if (zero_cost_only) break;
      c.overlap = overlap;
      const RunResult real = run_config(sys, model, c, w);
      const double iter_us = real.stats.iteration_seconds / double(real.stats.iterations) * 1e6;
      std::printf("   %s, overlap %-3s: %.1f us outside the forward pass of a %.0f us iteration (%.2f%%); "
                  "%.1f tok/s\n",
                  model_name.c_str(), overlap ? "on" : "off", overhead_us(real.stats), iter_us,
                  100.0 * overhead_us(real.stats) / iter_us, real.tokens_per_second());
      print_breakdown(real.stats, real.idle);
    }
    ModelInfo info{model.config, model.eos_ids, nullptr};
    std::fill(w.output_lengths.begin(), w.output_lengths.end(), 512);
    // A run lasts some 50 ms, where one preemption of the engine's threads
    // shows: the median of kZeroCostRuns, alternating the two modes.
    constexpr int kZeroCostRuns = 5;
    std::vector<RunResult> zero[2];
    for (int i = 0; i < kZeroCostRuns; ++i) {
      for (bool overlap : {true, false}) {
        c.overlap = overlap;
        auto engine = Engine::create(sys, c, info, std::make_shared<ZeroCostRunner>(), nullptr);
        zero[overlap ? 0 : 1].push_back(run(**engine, w));
      }
    }
    for (bool overlap : {true, false}) {
      std::vector<RunResult>& runs = zero[overlap ? 0 : 1];
      auto per_iteration = [](const RunResult& r) { return r.stats.iteration_seconds / double(r.stats.iterations) * 1e6; };
      std::sort(runs.begin(), runs.end(),
                [&](const RunResult& a, const RunResult& b) { return per_iteration(a) < per_iteration(b); });
      const RunResult& median = runs[runs.size() / 2];
      std::printf("   zero-cost executor, overlap %-3s: %.1f us per iteration (pure scheduling and messaging; "
                  "median of %d runs, %.1f-%.1f)\n",
                  overlap ? "on" : "off", per_iteration(median), kZeroCostRuns, per_iteration(runs.front()),
                  per_iteration(runs.back()));
      print_breakdown(median.stats, median.idle);
    }
    std::printf("\n");
  }

  if (overhead_only) return 0;
  // 4: memory pressure: a quarter of the KV the workload wants.
  std::printf("4. throughput under memory pressure (KV for 1536 tokens: ~1/4 of the running set)\n");
  const RunResult ample = cont;
  std::printf("   ample KV    %8.1f tok/s\n", ample.tokens_per_second());
  for (PreemptionMode mode : {PreemptionMode::recompute, PreemptionMode::swap, PreemptionMode::cost}) {
    EngineConfig c = base;
    c.kv_cache_tokens = 1536;  // the longest request (32 + 1024 tokens) still fits
    c.swap_space_tokens = 32 * 1152;
    c.preemption = mode;
    const RunResult r = run_config(sys, model, c, chat);
    std::printf("   %-10s  %8.1f tok/s  preemptions: %llu recompute, %llu swap\n", to_string(mode),
                r.tokens_per_second(), (unsigned long long)r.stats.preemptions_recompute,
                (unsigned long long)r.stats.preemptions_swap);
  }
  return 0;
}
