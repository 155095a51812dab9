// itl_bench: decoding streams' inter-token gaps while long prompts arrive,
// with the default iteration budget and with latency targets
// (EngineConfig::target_itl_ms, `--target-itl-ms`). The actor engine,
// in-process, on a real or dummy model.
//
//   itl_bench [--model dummy:llama-110m] [--decoders 8] [--prompts 6]
//             [--prompt-len 900] [--interval-ms 400] [--targets 0,50,100]
//             [--threads 0] [--trace FILE]
//
// For each target (0: the defaults, max_batched_tokens 2048 and
// prefill_chunk 512), a fresh engine: `decoders` streams of 16-token prompts
// decode (greedy, EOS ignored) while `prompts` prompts of `prompt-len` tokens
// arrive every `interval-ms` (each asks for 4 tokens). Reported over the
// window from the first arrival to the last prompt's first token: the
// decoders' gaps between consecutive tokens (worst, p99, p50), the worst
// over the target, the prompts' time to first token, and the decoders'
// tokens per second in that window.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "actors/engine.hpp"
#include "bench/bench_util.hpp"
#include "tests/actors/engine_test_util.hpp"

namespace conveyor {
namespace {

using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point t0, clock_type::time_point t) {
  return std::chrono::duration<double>(t - t0).count();
}

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, size_t(q * double(v.size())))];
}

struct Options {
  std::string model = "dummy:llama-110m";
  int decoders = 8, prompts = 6, prompt_len = 900, interval_ms = 400, threads = 0;
  std::vector<double> targets = {0, 50, 100};
  std::string trace;  // --trace FILE: every gap of the window, and the prompts' times
};

struct Figures {
  double worst = 0, p99 = 0, p50 = 0, ttft_mean = 0, ttft_max = 0, decode_tps = 0;
};

Figures run(caf::actor_system& sys, const LoadedModel& model, const Options& o, double target_ms) {
  EngineConfig config;
  config.threads = o.threads;
  config.target_itl_ms = target_ms;
  auto engine = Engine::create(sys, config, model);
  if (!engine) {
    std::fprintf(stderr, "itl_bench: %s\n", engine.error().message.c_str());
    std::exit(1);
  }
  std::mt19937_64 rng(11);
  auto prompt = [&](int n) {
    std::vector<int32_t> p(static_cast<size_t>(n));
    for (int32_t& t : p) t = 3 + int32_t(rng() % uint64_t(std::min(model.config.vocab_size, 250) - 3));
    return p;
  };
  std::mutex mutex;
  std::vector<std::vector<clock_type::time_point>> token_times(size_t(o.decoders));
  std::vector<clock_type::time_point> first_token(size_t(o.prompts));
  testing::Collector done;
  std::vector<RequestHandle> decoders;
  const int32_t decode_len = model.config.context_length - 32;
  for (int d = 0; d < o.decoders; ++d) {
    EventCallback inner = done.callback_for(uint64_t(d) + 1);
    decoders.push_back((*engine)->submit(testing::greedy_spec(uint64_t(d) + 1, prompt(16), decode_len, true),
                      [&, d, inner](const StreamEvent& e) {
                        {
                          std::lock_guard lock(mutex);
                          for (size_t i = 0; i < e.token_ids.size(); ++i)
                            token_times[size_t(d)].push_back(clock_type::now());
                        }
                        inner(e);
                      }));
  }
  // Let the decoders get going (and the cost model see decode steps).
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  const auto window_start = clock_type::now();
  std::vector<clock_type::time_point> submitted(size_t(o.prompts));
  testing::Collector prompts_done;
  for (int p = 0; p < o.prompts; ++p) {
    submitted[size_t(p)] = clock_type::now();
    EventCallback inner = prompts_done.callback_for(uint64_t(p) + 1000);
    (*engine)->submit(testing::greedy_spec(uint64_t(p) + 1000, prompt(o.prompt_len), 4, true),
                      [&, p, inner](const StreamEvent& e) {
                        {
                          std::lock_guard lock(mutex);
                          if (!e.token_ids.empty() && first_token[size_t(p)] == clock_type::time_point{})
                            first_token[size_t(p)] = clock_type::now();
                        }
                        inner(e);
                      });
    std::this_thread::sleep_for(std::chrono::milliseconds(o.interval_ms));
  }
  prompts_done.wait_for(size_t(o.prompts), std::chrono::seconds(3600));
  clock_type::time_point window_end;
  Figures f;
  {
    std::lock_guard lock(mutex);
    window_end = *std::max_element(first_token.begin(), first_token.end());
    for (int p = 0; p < o.prompts; ++p) {
      const double t = seconds_since(submitted[size_t(p)], first_token[size_t(p)]);
      f.ttft_mean += t / o.prompts;
      f.ttft_max = std::max(f.ttft_max, t);
    }
    std::vector<double> gaps;
    int64_t tokens = 0;
    FILE* trace = o.trace.empty() ? nullptr : std::fopen(o.trace.c_str(), "a");
    if (trace != nullptr) {
      std::fprintf(trace, "# target %.0f ms: prompt submitted_s first_token_s\n", target_ms);
      for (int p = 0; p < o.prompts; ++p)
        std::fprintf(trace, "prompt %d %.4f %.4f\n", p, seconds_since(window_start, submitted[size_t(p)]),
                     seconds_since(window_start, first_token[size_t(p)]));
    }
    for (size_t d = 0; d < token_times.size(); ++d) {
      const auto& times = token_times[d];
      for (size_t i = 1; i < times.size(); ++i) {
        if (times[i] < window_start || times[i] > window_end) continue;
        gaps.push_back(seconds_since(times[i - 1], times[i]));
        ++tokens;
        if (trace != nullptr)
          std::fprintf(trace, "gap %zu %.4f %.2f\n", d, seconds_since(window_start, times[i]), gaps.back() * 1e3);
      }
    }
    if (trace != nullptr) std::fclose(trace);
    f.worst = gaps.empty() ? 0 : *std::max_element(gaps.begin(), gaps.end());
    f.p99 = percentile(gaps, 0.99);
    f.p50 = percentile(gaps, 0.5);
    f.decode_tps = double(tokens) / seconds_since(window_start, window_end);
  }
  for (const RequestHandle& h : decoders) h.cancel();
  done.wait_for(size_t(o.decoders), std::chrono::seconds(600));
  return f;
}

}  // namespace
}  // namespace conveyor

int main(int argc, char** argv) {
  using namespace conveyor;
  Options o;
  for (int i = 1; i < argc; ++i) {
    auto next = [&] { return i + 1 < argc ? argv[++i] : (std::fprintf(stderr, "%s needs a value\n", argv[i]), std::exit(2), ""); };
    if (!std::strcmp(argv[i], "--model")) o.model = next();
    else if (!std::strcmp(argv[i], "--decoders")) o.decoders = std::atoi(next());
    else if (!std::strcmp(argv[i], "--prompts")) o.prompts = std::atoi(next());
    else if (!std::strcmp(argv[i], "--prompt-len")) o.prompt_len = std::atoi(next());
    else if (!std::strcmp(argv[i], "--interval-ms")) o.interval_ms = std::atoi(next());
    else if (!std::strcmp(argv[i], "--targets")) o.targets = parse_list(next());
    else if (!std::strcmp(argv[i], "--threads")) o.threads = std::atoi(next());
    else if (!std::strcmp(argv[i], "--trace")) o.trace = next();
    else {
      std::fprintf(stderr,
                   "usage: itl_bench [--model M] [--decoders N] [--prompts N] [--prompt-len N] "
                   "[--interval-ms N] [--targets 0,50,100] [--threads N] [--trace FILE]\n");
      return 2;
    }
  }
  if (o.decoders < 1 || o.prompts < 1 || o.prompt_len < 1 || o.interval_ms < 0) {
    std::fprintf(stderr, "itl_bench: counts must be positive\n");
    return 2;
  }
  auto loaded = load_model(o.model);
  if (!loaded) {
    std::fprintf(stderr, "itl_bench: %s\n", loaded.error().message.c_str());
    return 1;
  }
  LoadedModel model = std::move(loaded).value();
  model.config.context_length = std::max(model.config.context_length, 2048);
  if (o.prompt_len + 8 > model.config.context_length) {
    std::fprintf(stderr, "itl_bench: --prompt-len must leave room in the context (%d)\n", model.config.context_length);
    return 2;
  }
  std::printf("model %s; %d decoders; %d prompts of %d tokens, one every %d ms; %u hardware threads\n",
              o.model.c_str(), o.decoders, o.prompts, o.prompt_len, o.interval_ms,
              std::thread::hardware_concurrency());
  std::printf("%10s %10s %10s %10s %12s %12s %12s %14s\n", "target_ms", "worst_ms", "p99_ms", "p50_ms",
              "worst/target", "ttft_mean_s", "ttft_max_s", "decode_tok/s");
  testing::EngineSystemConfig cfg;
  caf::actor_system sys{cfg};
  for (double target : o.targets) {
    const Figures f = run(sys, model, o, target);
    char ratio[32] = "-";
    if (target > 0) std::snprintf(ratio, sizeof ratio, "%.2f", f.worst * 1e3 / target);
    std::printf("%10.0f %10.1f %10.1f %10.1f %12s %12.2f %12.2f %14.1f\n", target, f.worst * 1e3, f.p99 * 1e3,
                f.p50 * 1e3, ratio, f.ttft_mean, f.ttft_max, f.decode_tps);
    std::fflush(stdout);
  }
  return 0;
}
