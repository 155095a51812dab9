// soak_bench: streams abandoned at random points against a real server.
//
// An http::Server in front of an Engine, both in this process (so the
// policies can be swapped through Engine::set_*_policy while the clients
// run, and Engine::stats() and VmRSS are this process's), on the embedded
// default model (conveyor-tiny: byte tokenizer, plain chat template, so
// chat requests work and a step takes well under a millisecond). The clients
// (bench/soak/soak_client.hpp) talk to it over loopback: SSE completions, SSE
// chat completions and WebSocket requests, each abandoned where
// bench/soak/soak_workload.hpp drew.
//
// The KV cache is sized so the requests in flight would need --kv-factor
// (10) times its blocks, with host swap space of 4 times the cache. The
// streams are split into phases: a warm-up, then recompute, swap and cost
// preemption, then a phase whose admission and preemption policies are
// swapped at random times (every 50 ms on average). After each phase the
// clients are done; the program waits for the engine to settle and checks:
//   - no stream lost (every stream completed or was abandoned by its client);
//   - nothing running, waiting or swapped; no device or host KV block in use
//     (Engine::stats(), and /metrics says the same);
// and at the end that VmRSS grew less than --rss-growth-mib (8) since the
// warm-up settled. Why 8 MiB: after the warm-up nothing in the process
// should grow with the number of requests; on two cores VmRSS grows 0.6 MiB
// over the 9,000 streams after it (malloc's arenas settling; heap in use,
// also printed, is flat), while the leak this soak found (every finished
// request actor, as one actor per request was, kept alive by its monitor of
// the scheduler, 1.3 KiB each)
// grew it 11.9 MiB. 8 MiB is more than 10 times the noise and catches any
// leak of 1 KiB or more per stream in a full run (9,000 measured streams);
// a --quick run measures 270 streams, too few for the bound to see a leak
// of that size: it checks lost requests and the settled engine.
// Exit status 0 when all hold, 1 when one fails, 2 for bad arguments or a
// server that does not start.
//
// usage: soak_bench [--streams 10000] [--concurrency 64] [--seed 1] [--quick] ...
//        (--help lists them)
#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <malloc.h>
#include <mutex>
#include <random>
#include <thread>

#include "actors/engine.hpp"
#include "base/cli_checks.hpp"
#include "bench/soak/soak_client.hpp"
#include "bench/soak/soak_report.hpp"
#include "bench/soak/soak_workload.hpp"
#include "http/engine_port.hpp"
#include "http/server.hpp"
#include "http/server_log.hpp"

namespace conveyor::soak {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

struct Args {
  int64_t streams = 10000;
  int32_t concurrency = 64;
  int32_t ws_per_socket = 4;
  uint64_t seed = 1;
  bool quick = false;
  double kv_factor = 10;
  int32_t max_tokens = 128;
  int32_t max_prompt_chars = 32;
  int threads = 1;
  double timeout_s = 60;
  double settle_s = 10;
  double rss_growth_mib = 8;
  double swap_interval_s = 0.05;
};

// A number field of /proc/self/status ("VmRSS", "Threads"), or -1.
int64_t proc_status(const std::string& field) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind(field + ":", 0) == 0) return std::stoll(line.substr(field.size() + 1));
  return -1;
}

int64_t vm_rss_kib() { return proc_status("VmRSS"); }

// A sample of /metrics ("conveyor:NAME VALUE"), or -1.
double metric(const std::string& text, const std::string& name) {
  const std::string key = "\nconveyor:" + name + " ";
  const size_t at = text.find(key);
  return at == std::string::npos ? -1.0 : std::strtod(text.c_str() + at + key.size(), nullptr);
}

// Waits until nothing runs and no KV block is held, or `timeout_s` passes.
SettledState settle(Engine& engine, uint16_t port, double timeout_s) {
  SettledState s;
  const auto start = Clock::now();
  for (;;) {
    auto stats = engine.stats();
    if (stats) {
      s.running = stats->num_running;
      s.waiting = stats->num_waiting;
      s.swapped = stats->num_swapped;
      s.blocks_used = stats->blocks.used;
      s.host_blocks_used = stats->blocks.host_used;
      s.blocks_total = stats->blocks.total;
      s.settled = !s.running && !s.waiting && !s.swapped && !s.blocks_used && !s.host_blocks_used;
    }
    if (s.settled || seconds_since(start) > timeout_s) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  s.settle_seconds = seconds_since(start);
  const std::string metrics = "\n" + http_get(port, "/metrics", 10);
  s.metrics_running = metric(metrics, "num_requests_running");
  s.metrics_waiting = metric(metrics, "num_requests_waiting");
  s.metrics_kv_usage = metric(metrics, "kv_cache_usage_ratio");
  return s;
}

// Swaps the admission or the preemption policy at random times until stopped.
class PolicyChurn {
 public:
  PolicyChurn(Engine& engine, double mean_interval_s, uint64_t seed)
      : engine_(engine), mean_interval_s_(mean_interval_s), rng_(seed), thread_([this] { loop(); }) {}
  ~PolicyChurn() { stop(); }

  void stop() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }
  int64_t swaps() const { return swaps_; }
  const std::vector<std::string>& errors() const { return errors_; }

 private:
  void loop() {
    static const char* const admission[] = {"conservative", "watermark", "profiled"};
    static const char* const preemption[] = {"recompute", "swap", "cost"};
    std::exponential_distribution<double> wait(1.0 / mean_interval_s_);
    std::unique_lock lock(mutex_);
    while (!cv_.wait_for(lock, std::chrono::duration<double>(wait(rng_)), [this] { return stopping_; })) {
      const bool admit = rng_() % 2 == 0;
      const std::string name = admit ? admission[rng_() % 3] : preemption[rng_() % 3];
      const Status s = admit ? engine_.set_admission_policy(name) : engine_.set_preemption_policy(name);
      if (!s) errors_.push_back(name + ": " + s.error().message);
      ++swaps_;
    }
  }

  Engine& engine_;
  const double mean_interval_s_;
  std::mt19937_64 rng_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool stopping_ = false;
  int64_t swaps_ = 0;
  std::vector<std::string> errors_;
  std::thread thread_;  // last: starts once the rest is built
};

struct PhaseSpec {
  std::string name;
  std::string preemption;  // "" with churn
  bool churn = false;
  int64_t streams = 0;
};

std::vector<PhaseSpec> phases_for(int64_t streams) {
  const int64_t warm_up = std::max<int64_t>(1, streams / 10);
  const int64_t each = (streams - warm_up) / 4;
  const int64_t last = streams - warm_up - 3 * each;
  return {{"warm-up", "recompute", false, warm_up},
          {"recompute", "recompute", false, each},
          {"swap", "swap", false, each},
          {"cost", "cost", false, each},
          {"churn", "", true, last}};
}

PhaseReport run_phase(const PhaseSpec& spec, Engine& engine, uint16_t port, const Args& args,
                      const WorkloadShape& shape, std::mt19937_64& rng) {
  PhaseReport report;
  report.name = spec.name;
  std::vector<std::string> failures;
  if (!spec.churn) {
    report.policies = "preemption " + spec.preemption;
    for (const Status& s : {engine.set_admission_policy("watermark"), engine.set_preemption_policy(spec.preemption)})
      if (!s) failures.push_back("policy: " + s.error().message);
  }
  const std::vector<StreamPlan> plans = make_streams(spec.streams, shape, rng);
  const auto before = engine.stats();
  ClientOptions client{port, args.concurrency, args.ws_per_socket, args.timeout_s};
  const auto start = Clock::now();
  std::vector<StreamOutcome> outcomes;
  if (spec.churn) {
    PolicyChurn churn(engine, args.swap_interval_s, rng());
    outcomes = run_streams(plans, client);
    churn.stop();
    report.policies = "policy swaps (" + std::to_string(churn.swaps()) + ")";
    for (const std::string& e : churn.errors()) failures.push_back("policy swap " + e);
  } else {
    outcomes = run_streams(plans, client);
  }
  report.seconds = seconds_since(start);
  for (size_t i = 0; i < plans.size(); ++i) report.tally.add(plans[i], outcomes[i]);
  report.end = settle(engine, port, args.settle_s);
  if (const auto after = engine.stats(); before && after) {
    report.preemptions_recompute = after->preemptions_recompute - before->preemptions_recompute;
    report.preemptions_swap = after->preemptions_swap - before->preemptions_swap;
    report.generated_tokens = after->generated_tokens - before->generated_tokens;
  }
  report.rss_kib = vm_rss_kib();
  const struct mallinfo2 heap = mallinfo2();
  report.heap_in_use_kib = int64_t((heap.uordblks + heap.hblkhd) / 1024);
  report.heap_held_kib = int64_t((heap.arena + heap.hblkhd) / 1024);
  report.threads = proc_status("Threads");
  report.failures = check_phase(report.tally, report.end);
  report.failures.insert(report.failures.end(), failures.begin(), failures.end());
  return report;
}

int run(const Args& args) {
  // Errors only: every abandoned stream would log a warning (status 499).
  http::configure_log(http::LogLevel::error, http::LogFormat::text);
  const WorkloadShape shape{args.max_prompt_chars, args.max_tokens};
  caf::actor_system_config cfg;
  add_engine_types(cfg);
  caf::actor_system sys{cfg};
  auto model = load_model("");
  if (!model) {
    std::fprintf(stderr, "soak_bench: %s\n", model.error().message.c_str());
    return 2;
  }
  const ModelConfig model_config = model->config;

  // 10x oversubscription: the streams in flight need kv_factor times the
  // cache, but the cache holds at least the largest single request (a chat
  // prompt's template adds a few dozen characters; n = 2 doubles the output).
  EngineConfig ec;
  ec.block_size = 16;
  ec.threads = args.threads;
  const double demand = args.concurrency * mean_stream_tokens(shape);
  const int64_t largest = args.max_prompt_chars + 64 + 2 * args.max_tokens;
  ec.kv_cache_tokens = std::max<int64_t>(int64_t(demand / args.kv_factor), largest);
  ec.kv_cache_tokens = (ec.kv_cache_tokens + ec.block_size - 1) / ec.block_size * ec.block_size;
  ec.swap_space_tokens = 4 * ec.kv_cache_tokens;
  auto engine = Engine::create(sys, ec, std::move(model).value());
  if (!engine) {
    std::fprintf(stderr, "soak_bench: %s\n", engine.error().message.c_str());
    return 2;
  }
  http::EnginePort port(**engine);
  http::ServerOptions options;
  options.port = 0;
  options.ws_max_messages_per_second = 0;  // the soak's sockets carry many requests; rates are tested elsewhere
  options.log_stats_interval_seconds = 0;
  options.log_level = http::LogLevel::error;
  auto context = http::make_model_context(model_config, port.tokenizer(), "", options.chat_template, "");
  if (!context) {
    std::fprintf(stderr, "soak_bench: %s\n", context.error().message.c_str());
    return 2;
  }
  http::Server server(port, options, std::move(context).value());
  auto bound = server.start();
  if (!bound) {
    std::fprintf(stderr, "soak_bench: %s\n", bound.error().message.c_str());
    return 2;
  }

  std::printf("soak_bench: %lld streams, concurrency %d (WebSocket: %d per socket), seed %llu, model %s, "
              "max_tokens <= %d, prompts <= %d chars\n",
              (long long)args.streams, args.concurrency, args.ws_per_socket, (unsigned long long)args.seed,
              (*engine)->model().config.name.c_str(), args.max_tokens, args.max_prompt_chars);
  std::printf("KV cache %d blocks of %d tokens; the streams in flight need about %.0f blocks (%.1fx); "
              "swap space %lld tokens; engine threads %d; VmRSS at start %.1f MiB\n",
              (*engine)->num_blocks(), ec.block_size, demand / ec.block_size,
              demand / double(ec.kv_cache_tokens), (long long)ec.swap_space_tokens, args.threads,
              double(vm_rss_kib()) / 1024.0);
  std::fflush(stdout);

  std::mt19937_64 rng(args.seed);
  std::vector<PhaseReport> reports;
  Tally total;
  const auto start = Clock::now();
  for (const PhaseSpec& spec : phases_for(args.streams)) {
    reports.push_back(run_phase(spec, **engine, *bound, args, shape, rng));
    print_phase(reports.back());
    std::fflush(stdout);
    total.merge(reports.back().tally);
  }
  const double seconds = seconds_since(start);
  print_total(reports, total, seconds);

  std::vector<std::string> failures;
  for (const PhaseReport& r : reports)
    for (const std::string& f : r.failures) failures.push_back(r.name + ": " + f);
  const double baseline = double(reports.front().rss_kib) / 1024.0;
  const double final_rss = double(reports.back().rss_kib) / 1024.0;
  const int64_t measured = total.sent - reports.front().tally.sent;
  std::printf("VmRSS after the warm-up %.1f MiB, at the end %.1f MiB: growth %.1f MiB over %lld streams "
              "(%.2f KiB per stream; bound %.0f MiB); heap in use %.1f MiB then %.1f MiB\n",
              baseline, final_rss, final_rss - baseline, (long long)measured,
              measured ? (final_rss - baseline) * 1024.0 / double(measured) : 0.0, args.rss_growth_mib,
              double(reports.front().heap_in_use_kib) / 1024.0, double(reports.back().heap_in_use_kib) / 1024.0);
  if (final_rss - baseline >= args.rss_growth_mib)
    failures.push_back("VmRSS grew " + std::to_string(final_rss - baseline) + " MiB");
  server.stop();

  if (failures.empty()) {
    std::printf("soak_bench: PASS\n");
    return 0;
  }
  for (const std::string& f : failures) std::printf("FAIL %s\n", f.c_str());
  std::printf("soak_bench: FAIL (%zu)\n", failures.size());
  return 1;
}

}  // namespace
}  // namespace conveyor::soak

int main(int argc, char** argv) {
  conveyor::soak::Args args;
  CLI::App app{"soak_bench: streams abandoned at random points against an in-process server"};
  app.add_option("--streams", args.streams, "streams in all, warm-up included (default 10000)")->check(CLI::Range(int64_t(5), int64_t(1) << 40));
  app.add_option("--concurrency", args.concurrency, "streams in flight at once (default 64)")->check(CLI::Range(1, 1000));
  app.add_option("--ws-per-socket", args.ws_per_socket, "WebSocket requests in flight per socket (default 4)")->check(CLI::Range(1, 64));
  app.add_option("--seed", args.seed, "seed of the streams and the policy swaps (default 1)");
  app.add_flag("--quick", args.quick, "a smoke run: 300 streams unless --streams is given");
  app.add_option("--kv-factor", args.kv_factor, "KV oversubscription: the streams in flight need this many times the cache (default 10)")->check(conveyor::cli::finite_range(1, 1000));
  app.add_option("--max-tokens", args.max_tokens, "largest max_tokens of a stream (default 128)")->check(CLI::Range(4, 256));
  app.add_option("--max-prompt-chars", args.max_prompt_chars, "longest prompt, characters (default 32)")->check(CLI::Range(16, 400));
  app.add_option("--threads", args.threads, "the engine's compute threads (default 1: the clients and the server need the other core)")->check(CLI::Range(0, 256));
  app.add_option("--timeout", args.timeout_s, "seconds a stream may wait for its next event before it counts as lost (default 60)")->check(conveyor::cli::positive_number());
  app.add_option("--settle", args.settle_s, "seconds the engine may take to settle after a phase (default 10)")->check(conveyor::cli::positive_number());
  app.add_option("--rss-growth-mib", args.rss_growth_mib, "largest VmRSS growth after the warm-up, MiB (default 8)")->check(conveyor::cli::positive_number());
  app.add_option("--swap-interval", args.swap_interval_s, "mean seconds between policy swaps in the churn phase (default 0.05)")->check(conveyor::cli::positive_number());
  if (auto code = conveyor::cli::parse_command_line(app, argc, argv)) return *code;
  if (args.quick && app.count("--streams") == 0) args.streams = 300;
  return conveyor::soak::run(args);
}
