// `conveyor bench`: a load generator for a running `conveyor serve` (or any
// OpenAI-compatible server). It sends streaming requests at a fixed
// concurrency (closed loop) or at a Poisson arrival rate, and reports
// throughput and latency: time to first token, inter-token latency, time per
// output token and end-to-end latency.
//
// The pieces: bench_workload (what to send), bench_request (the request
// body), bench_client (the Beast client that sends it and times the SSE
// chunks), bench_stats (percentiles, the report, the JSON), bench_metrics
// (the server's /metrics gauges during the run), bench_report (--report: a
// directory of runs drawn as an HTML page with bench_svg's plots).
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>

#include <boost/json.hpp>

#include "tools/conveyor/bench_client.hpp"
#include "tools/conveyor/bench_report.hpp"
#include "tools/conveyor/bench_request.hpp"
#include "tools/conveyor/bench_stats.hpp"
#include "tools/conveyor/bench_workload.hpp"
#include "base/cli_checks.hpp"
#include "tools/conveyor/commands.hpp"

namespace conveyor::cli {
namespace {

using namespace conveyor::bench;

struct BenchArgs {
  std::string url = "http://127.0.0.1:8000";
  std::string api_key;
  std::string endpoint = "completions";
  std::string model;
  std::optional<int64_t> concurrency;
  std::optional<double> rate;
  std::optional<int64_t> num_requests;
  std::optional<double> duration_s;
  std::optional<int64_t> input_len;
  std::optional<int64_t> output_len;
  std::optional<std::string> input_dist;
  std::optional<std::string> output_dist;
  std::optional<std::string> dataset;
  bool ignore_eos = true;
  double temperature = 0.0;
  uint64_t seed = 0;
  std::optional<std::string> json_out;
  std::optional<std::string> report_dir;
  std::string label;
  std::string group = "runs";
  std::string note;
  std::optional<std::string> add_figures;
  double metrics_interval_s = 0.25;
  double timeout_s = 600;
  bool quiet = false;
};

constexpr int64_t kDefaultNumRequests = 100;
constexpr int64_t kDefaultLength = 128;

std::string shortest(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", x);
  return buf;
}

int usage_error(const std::string& message) {
  std::cerr << "conveyor bench: " << message << "\n";
  return kExitUsage;
}

int runtime_error(const std::string& message) {
  std::cerr << "conveyor bench: " << message << "\n";
  return kExitFailure;
}

// The progress line: redrawn in place on a terminal, one line a second in a log.
ProgressFn make_progress_printer(bool quiet) {
  if (quiet) return {};
  const bool tty = isatty(fileno(stderr));
  return [tty](const Progress& p) {
    char line[200];
    std::snprintf(line, sizeof line,
                  "[bench] %6.1f s  sent %lld  done %lld  failed %lld  running %lld  %lld tokens out (%.1f tok/s)",
                  p.elapsed_s, static_cast<long long>(p.sent), static_cast<long long>(p.completed),
                  static_cast<long long>(p.failed), static_cast<long long>(p.in_flight),
                  static_cast<long long>(p.output_tokens),
                  p.elapsed_s > 0 ? static_cast<double>(p.output_tokens) / p.elapsed_s : 0.0);
    if (tty)
      std::fprintf(stderr, "\r%s\x1b[K", line);
    else
      std::fprintf(stderr, "%s\n", line);
    std::fflush(stderr);
  };
}

// The fields a report keeps with a run, next to what the run measured.
void label_run(boost::json::object& run, const BenchArgs& args) {
  if (!args.label.empty()) run["label"] = args.label;
  run["group"] = args.group;
  if (!args.note.empty()) run["note"] = args.note;
  run["date"] = utc_now_iso8601();
}

// --add-figures FILE: figures another program measured, into the report
// without sending anything.
int add_figures(const BenchArgs& args) {
  std::ifstream in(*args.add_figures, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in) return usage_error("--add-figures " + *args.add_figures + ": cannot read");
  boost::system::error_code ec;
  boost::json::value v = boost::json::parse(text.str(), ec);
  if (ec || !v.is_object() || !v.get_object().contains("figures"))
    return usage_error("--add-figures " + *args.add_figures + ": want a JSON object with \"figures\"");
  boost::json::object run = std::move(v.get_object());
  run["kind"] = "figures";
  if (!run.contains("source")) run["source"] = *args.add_figures;
  label_run(run, args);
  if (auto s = append_to_report(*args.report_dir, std::move(run), utc_now_iso8601()); !s)
    return runtime_error(s.error().message);
  std::cerr << "conveyor bench: added " << *args.add_figures << " to " << *args.report_dir << "/results.json\n";
  return 0;
}

int run_bench(const BenchArgs& args) {
  // Arguments first: every mistake is an exit 2 before anything is sent.
  if (args.add_figures) {
    if (!args.report_dir) return usage_error("--add-figures needs --report DIR");
    return add_figures(args);
  }
  if (args.json_out) {
    // Before the run, so a results file that cannot be written fails in a second, not after the load.
    if (args.json_out->empty()) return usage_error("--json needs a file name");
    std::error_code ec;
    const std::filesystem::path dir = std::filesystem::absolute(*args.json_out, ec).parent_path();
    if (ec || !std::filesystem::is_directory(dir, ec) || ::access(dir.c_str(), W_OK) != 0)
      return usage_error("--json " + *args.json_out + ": the folder " + dir.string() + " is missing or not writable");
    if (std::filesystem::is_directory(*args.json_out, ec))
      return usage_error("--json " + *args.json_out + " is a folder");
  }
  if (args.report_dir) {
    // Before the run, so an unreadable report fails in a second, not after the load.
    if (auto existing = load_report(*args.report_dir); !existing) return usage_error("--report: " + existing.error().message);
  }
  auto url = ServerUrl::parse(args.url);
  if (!url) return usage_error(url.error().message);
  url->api_key = args.api_key;
  const Endpoint endpoint = args.endpoint == "chat" ? Endpoint::chat : Endpoint::completions;

  LengthDist input = LengthDist::fixed(args.input_len.value_or(kDefaultLength));
  LengthDist output = LengthDist::fixed(args.output_len.value_or(kDefaultLength));
  if (args.input_dist) {
    auto d = LengthDist::parse(*args.input_dist);
    if (!d) return usage_error("--input-dist: " + d.error().message);
    input = *d;
  }
  if (args.output_dist) {
    auto d = LengthDist::parse(*args.output_dist);
    if (!d) return usage_error("--output-dist: " + d.error().message);
    output = *d;
  }
  std::optional<WorkloadSource> workload;
  if (args.dataset) {
    auto entries = load_dataset(*args.dataset);
    if (!entries) return usage_error("--dataset " + entries.error().message);
    if (endpoint == Endpoint::chat)
      for (const auto& e : *entries)
        if (!e.prompt_is_text)
          return usage_error("--dataset " + *args.dataset +
                             ": token-id prompts need --endpoint completions (chat takes text)");
    workload.emplace(std::move(*entries), output, args.seed);
  } else {
    workload.emplace(input, output, endpoint == Endpoint::chat, args.seed);
  }

  LoadPlan plan;
  plan.url = *url;
  plan.endpoint = endpoint;
  plan.options.ignore_eos = args.ignore_eos;
  plan.options.temperature = args.temperature;
  plan.rate = args.rate.value_or(0.0);
  plan.concurrency = args.concurrency.value_or(args.rate ? 0 : 1);
  plan.duration_s = args.duration_s.value_or(0.0);
  plan.num_requests = args.num_requests.value_or(args.duration_s ? 0 : kDefaultNumRequests);
  plan.seed = args.seed;
  plan.timeout_s = args.timeout_s;
  plan.metrics_interval_s = args.metrics_interval_s;

  // Then the server: reachable, and serving which model.
  auto models = fetch_models(plan.url, std::min(plan.timeout_s, 30.0));
  if (!models) return runtime_error(models.error().message);
  plan.options.model = args.model.empty() ? models->front() : args.model;

  const std::string load_line =
      plan.rate > 0 ? "Load:      Poisson arrivals, " + shortest(plan.rate) + " req/s" +
                          (plan.concurrency > 0 ? ", at most " + std::to_string(plan.concurrency) + " in flight" : "")
                    : "Load:      closed loop, concurrency " + std::to_string(plan.concurrency);
  const std::string prompt_line =
      args.dataset ? "Prompts:   " + *args.dataset
                   : "Prompts:   " + input.describe() + (endpoint == Endpoint::chat ? " words" : " random token ids");
  const std::string output_line = "Output:    " + output.describe() + " tokens" +
                                  (args.ignore_eos ? ", ignore_eos" : "");
  std::cerr << "conveyor bench: " << (plan.num_requests ? std::to_string(plan.num_requests) + " requests" : "")
            << (plan.num_requests && plan.duration_s > 0 ? ", at most " : "")
            << (plan.duration_s > 0 ? shortest(plan.duration_s) + " s" : "") << " to http://"
            << plan.url.host_header() << plan.url.prefix << endpoint_path(endpoint) << " (model "
            << plan.options.model << ")\n";

  const ProgressFn progress = make_progress_printer(args.quiet);
  LoadResult run = run_load(plan, *workload, progress);
  if (progress && isatty(fileno(stderr))) std::fprintf(stderr, "\n");
  if (run.interrupted) std::cerr << "conveyor bench: interrupted; requests in flight are left out\n";

  const Summary summary = summarize(run.results, run.duration_s);
  print_report(std::cout, summary,
               {"Server:    http://" + plan.url.host_header() + plan.url.prefix + std::string(endpoint_path(endpoint)),
                "Model:     " + plan.options.model, load_line, prompt_line, output_line});

  if (!run.metrics.error.empty()) std::cerr << "conveyor bench: server gauges: " << run.metrics.error << "\n";

  if (args.json_out || args.report_dir) {
    boost::json::object config{
        {"url", args.url},
        {"endpoint", args.endpoint},
        {"model", plan.options.model},
        {"mode", plan.rate > 0 ? "poisson" : "closed"},
        {"concurrency", plan.concurrency},
        {"rate", plan.rate},
        {"num_requests", plan.num_requests},
        {"duration_s", plan.duration_s},
        {"input", args.dataset ? *args.dataset : input.describe()},
        {"output", output.describe()},
        {"ignore_eos", plan.options.ignore_eos},
        {"temperature", plan.options.temperature},
        {"seed", plan.seed},
        {"interrupted", run.interrupted},
    };
    boost::json::object results = to_json(summary, config, run.results);
    results["metrics"] = to_json(run.metrics);
    if (args.json_out) {
      std::ofstream out(*args.json_out, std::ios::binary | std::ios::trunc);
      out << boost::json::serialize(results) << "\n";
      if (!out) return runtime_error(*args.json_out + ": cannot write the results");
    }
    if (args.report_dir) {
      label_run(results, args);
      if (auto s = append_to_report(*args.report_dir, std::move(results), utc_now_iso8601()); !s)
        return runtime_error(s.error().message);
      std::cerr << "conveyor bench: report in " << *args.report_dir << "/index.html\n";
    }
  }
  if (summary.completed == 0) {
    if (run.interrupted) return runtime_error("interrupted before any request finished");
    std::string first_error;
    for (const auto& r : run.results)
      if (!r.ok) {
        first_error = ": " + r.error_kind + " (" + r.error_message + ")";
        break;
      }
    return runtime_error("no request succeeded" + first_error);
  }
  return 0;
}

}  // namespace

void add_bench_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<BenchArgs>();
  CLI::App* cmd = app.add_subcommand(
      "bench", "Load-test a running server with streaming requests (throughput, TTFT, ITL, latency)");
  cmd->add_option("--url", args->url, "server address, http://HOST:PORT")->capture_default_str();
  cmd->add_option("--api-key", args->api_key,
                  "a key of the server's (serve --api-key or --api-key-file), sent as Authorization: Bearer KEY "
                  "(default: $CONVEYOR_API_KEY)")
      ->envname("CONVEYOR_API_KEY");
  cmd->add_option("--endpoint", args->endpoint, "completions or chat")
      ->capture_default_str()
      ->check(CLI::IsMember({"completions", "chat"}));
  cmd->add_option("--model", args->model, "model name to request (default: the first one /v1/models lists)");
  cmd->add_option("--concurrency", args->concurrency,
                  "closed loop: keep N requests in flight (default 1); with --rate: at most N in flight")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--rate", args->rate, "open loop: Poisson arrivals, R requests per second")
      ->check(positive_number());
  cmd->add_option("--num-requests", args->num_requests, "requests to send (default 100, no limit with --duration)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--duration", args->duration_s, "stop sending after S seconds (requests in flight finish)")
      ->check(positive_number());
  auto* in_len = cmd->add_option("--input-len", args->input_len, "prompt length in tokens (default 128)")
                     ->check(CLI::PositiveNumber);
  auto* out_len = cmd->add_option("--output-len", args->output_len, "tokens to generate (default 128)")
                      ->check(CLI::PositiveNumber);
  auto* in_dist = cmd->add_option("--input-dist", args->input_dist,
                                  "prompt lengths: fixed:N, uniform:A:B or exponential:MEAN[:CAP]");
  auto* out_dist = cmd->add_option("--output-dist", args->output_dist,
                                   "output lengths: fixed:N, uniform:A:B or exponential:MEAN[:CAP]");
  auto* dataset = cmd->add_option("--dataset", args->dataset,
                                  "JSONL file: one {\"prompt\": string or token ids, \"max_tokens\": n} per line");
  in_len->excludes(in_dist);
  out_len->excludes(out_dist);
  dataset->excludes(in_len);
  dataset->excludes(in_dist);
  cmd->add_flag("--ignore-eos,!--no-ignore-eos", args->ignore_eos,
                "generate the full output length even past end-of-sequence (default on)");
  cmd->add_option("--temperature", args->temperature, "sampling temperature (default 0: greedy)")
      ->check(finite_range(0, 100));
  cmd->add_option("--seed", args->seed, "seed for prompts, lengths and arrival times (default 0)");
  cmd->add_option("--json", args->json_out, "write the results (summary and per-request records) to FILE");
  cmd->add_option("--report", args->report_dir,
                  "append this run to DIR/results.json (same content as --json, plus --label, --group, --note) "
                  "and redraw DIR/index.html from every run in it");
  cmd->add_option("--label", args->label, "--report: the run's name in tables and legends (a series across concurrencies)");
  cmd->add_option("--group", args->group, "--report: the page section the run is compared in")->capture_default_str();
  cmd->add_option("--note", args->note, "--report: conditions to show with the run (e.g. the server's flags)");
  cmd->add_option("--add-figures", args->add_figures,
                  "--report: add FILE ({\"figures\": {...}, \"ttft_ms\"?: [...], \"e2e_ms\"?: [...]}, e.g. "
                  "agent_swarm --json) to the report instead of running a load");
  cmd->add_option("--metrics-interval", args->metrics_interval_s,
                  "poll the server's GET /metrics (KV cache usage, running, waiting) every S seconds during the run; "
                  "0: never")
      ->capture_default_str()
      ->check(finite_range(0, 1e6));
  cmd->add_option("--timeout", args->timeout_s, "seconds one network step may take before the request fails")
      ->capture_default_str()
      ->check(positive_number());
  cmd->add_flag("--quiet", args->quiet, "no progress line");
  cmd->callback([args, &exit_code] { exit_code = run_bench(*args); });
}

}  // namespace conveyor::cli
