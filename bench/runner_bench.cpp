// Decode throughput of a backend's StepRunner (backends/backend.hpp), on the
// CPU or a CUDA device: the runner alone, driven with step plans as the
// scheduler builds them, no actors and no HTTP.
//
//   runner_bench [--device cpu|cuda[:N]] [--models dummy:llama-110m,dummy:llama-1b]
//                [--batches 1,2,4,8,16,32,64,128,256] [--context 128] [--steps 16]
//                [--repeats 3] [--threads 0]
//
// For each model it builds the device's backend once, with KV room for the
// largest batch; for each batch size B it prefills B sequences of `context`
// random tokens (spans packed into steps of at most 2048 tokens), then times
// `steps` decode steps in which every sequence adds one token (greedy, the
// token the previous step sampled, as the scheduler's placeholders give it),
// `repeats` times, keeping the best median. It prints one line per batch:
// the median step time and tokens per second (B / step time). A pipelined
// runner (the CUDA runner) is timed a second way too, as the executor
// drives it: each step launched before the previous one finishes; those
// columns are the mean step time over `steps` steps, best of `repeats`.
// scripts/gpu-check.sh runs it on the GPU.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "backends/backend.hpp"
#include "bench/bench_util.hpp"

using namespace conveyor;

namespace {

int fail(const std::string& message) {
  std::fprintf(stderr, "runner_bench: %s\n", message.c_str());
  return 1;
}

struct Args {
  std::string device = "cpu";
  std::vector<std::string> models = {"dummy:llama-110m", "dummy:llama-1b"};
  std::vector<int> batches = {1, 2, 4, 8, 16, 32, 64, 128, 256};
  int context = 128, steps = 16, repeats = 3, threads = 0;
};

constexpr int32_t kBlock = 16;
constexpr int32_t kStepTokens = 2048;

// Runs one model at every batch size.
int bench_model(const Args& a, const std::string& spec) {
  auto loaded = load_model(spec);
  if (!loaded) return fail(spec + ": " + loaded.error().message);
  const ModelConfig mc = loaded->config;
  const int max_batch = *std::max_element(a.batches.begin(), a.batches.end());
  const int32_t decoded = 2 * a.steps * a.repeats + 1;  // run() steps, then launched ones
  const int32_t per_seq = (a.context + decoded + kBlock - 1) / kBlock;  // blocks
  if (a.context + decoded > mc.context_length)
    return fail(spec + ": --context plus the decoded tokens exceed the model's context");
  EngineConfig config;
  config.device = *parse_device(a.device);
  config.block_size = kBlock;
  config.kv_cache_tokens = int64_t(max_batch) * per_seq * kBlock;
  config.max_num_seqs = std::max(max_batch, 1);
  config.max_batched_tokens = kStepTokens;
  config.threads = a.threads;
  const double load_start = now_s();
  auto backend = backend_factory(config.device)(config, std::move(loaded).value());
  if (!backend) return fail(spec + ": " + backend.error().message);
  std::printf("%s on %s: %s, KV %s; ready in %.1f s\n", spec.c_str(), a.device.c_str(),
              backend->weights_description.c_str(), backend->capacity.origin.c_str(), now_s() - load_start);
  std::printf("%-18s %6s %10s %12s %14s %12s\n", "model", "batch", "step_ms", "tokens_s", "pipelined_ms",
              "tokens_s");
  StepRunner& runner = *backend->runner;
  std::mt19937 rng(7);
  seq_id next_id = 1;
  uint64_t iteration = 0;
  for (int b : a.batches) {
    // Sequence i holds blocks [i · per_seq, (i + 1) · per_seq).
    std::vector<seq_id> ids(static_cast<size_t>(b));
    std::vector<std::vector<int32_t>> tables(static_cast<size_t>(b));
    for (int i = 0; i < b; ++i) {
      ids[size_t(i)] = next_id++;
      for (int32_t k = 0; k < per_seq; ++k) tables[size_t(i)].push_back(i * per_seq + k);
    }
    SamplingParams greedy;
    greedy.temperature = 0.0f;
    greedy.max_tokens = 1 << 20;
    // Prefill: whole prompts, as many per step as fit.
    for (int i = 0; i < b;) {
      StepPlan plan;
      plan.iteration = iteration++;
      int32_t tokens = 0;
      for (; i < b && tokens + a.context <= kStepTokens; ++i) {
        std::vector<int32_t> prompt(size_t(a.context));
        for (int32_t& t : prompt) t = int32_t(rng() % uint32_t(mc.vocab_size));
        plan.batch.add_sequence(prompt, 0, tables[size_t(i)], true, int32_t(prompt.size()));
        plan.seq_ids.push_back(ids[size_t(i)]);
        plan.new_samplers.emplace_back(ids[size_t(i)], greedy);
        plan.new_sampler_prompts.push_back(prompt);
        tokens += a.context;
      }
      if (tokens == 0) return fail("--context is longer than a step's 2048 tokens");
      runner.run(plan);
    }
    int32_t pos = a.context;
    auto decode_plan = [&] {
      StepPlan plan;
      plan.iteration = iteration++;
      const int32_t placeholder = -1;  // the runner puts the last sample here
      for (int i = 0; i < b; ++i) {
        plan.batch.add_sequence(std::span(&placeholder, 1), pos,
                                std::span(tables[size_t(i)]).first(size_t(pos / kBlock + 1)), true);
        plan.seq_ids.push_back(ids[size_t(i)]);
      }
      ++pos;
      return plan;
    };
    double best = 1e30;
    for (int r = 0; r < a.repeats; ++r) {
      std::vector<double> times;
      for (int s = 0; s < a.steps; ++s) {
        StepPlan plan = decode_plan();
        const double start = now_s();
        const StepResult result = runner.run(plan);
        times.push_back(now_s() - start);
        if (int(result.tokens.size()) != b) return fail("a step sampled the wrong number of tokens");
      }
      best = std::min(best, median(times));
    }
    double best_pipelined = 0.0;
    if (runner.pipelined()) {
      best_pipelined = 1e30;
      for (int r = 0; r < a.repeats; ++r) {
        const double start = now_s();
        for (int s = 0; s <= a.steps; ++s) {
          if (s < a.steps) {
            StepPlan plan = decode_plan();
            runner.launch(plan);
          }
          if (s > 0 && int(runner.finish().tokens.size()) != b)
            return fail("a launched step sampled the wrong number of tokens");
        }
        best_pipelined = std::min(best_pipelined, (now_s() - start) / a.steps);
      }
    }
    if (best_pipelined > 0.0)
      std::printf("%-18s %6d %10.2f %12.0f %14.2f %12.0f\n", spec.c_str(), b, best * 1e3, b / best,
                  best_pipelined * 1e3, b / best_pipelined);
    else
      std::printf("%-18s %6d %10.2f %12.0f %14s %12s\n", spec.c_str(), b, best * 1e3, b / best, "-", "-");
    std::fflush(stdout);
    StepPlan retire;
    retire.iteration = iteration++;
    retire.retired = ids;
    runner.run(retire);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--device") a.device = value;
    else if (flag == "--models") a.models = split_list(value);
    else if (flag == "--batches") {
      a.batches.clear();
      for (const std::string& v : split_list(value)) a.batches.push_back(std::max(1, std::atoi(v.c_str())));
    } else if (flag == "--context") a.context = std::max(1, std::atoi(value.c_str()));
    else if (flag == "--steps") a.steps = std::max(1, std::atoi(value.c_str()));
    else if (flag == "--repeats") a.repeats = std::max(1, std::atoi(value.c_str()));
    else if (flag == "--threads") a.threads = std::atoi(value.c_str());
    else return fail("unknown flag " + flag);
  }
  if (argc % 2 == 0) return fail(std::string("flag without a value: ") + argv[argc - 1]);
  auto device = parse_device(a.device);
  if (!device) return fail(device.error().message);
  if (Status s = check_device(*device); !s) return fail(s.error().message);
  if (a.batches.empty() || a.models.empty()) return fail("no batches or no models");
  for (const std::string& m : a.models)
    if (int rc = bench_model(a, m); rc != 0) return rc;
  return 0;
}
