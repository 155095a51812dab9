#include "http/metrics_text.hpp"

#include <charconv>
#include <cmath>

namespace conveyor::http {
namespace {

std::string number(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (std::isnan(v)) return "NaN";
  char buf[32];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return ec == std::errc() ? std::string(buf, end) : "0";
}

class Writer {
 public:
  void header(const char* name, const char* type, const char* help) {
    out_ += "# HELP conveyor:";
    out_ += name;
    out_ += ' ';
    out_ += help;
    out_ += "\n# TYPE conveyor:";
    out_ += name;
    out_ += ' ';
    out_ += type;
    out_ += '\n';
  }
  void sample(const char* name, const std::string& labels, const std::string& value) {
    out_ += "conveyor:";
    out_ += name;
    if (!labels.empty()) out_ += "{" + labels + "}";
    out_ += ' ';
    out_ += value;
    out_ += '\n';
  }
  void gauge(const char* name, const char* help, double v) {
    header(name, "gauge", help);
    sample(name, "", number(v));
  }
  void counter(const char* name, const char* help, uint64_t v) {
    header(name, "counter", help);
    sample(name, "", std::to_string(v));
  }
  void histogram(const char* name, const char* help, const Histogram& h) {
    const Histogram::Snapshot s = h.snapshot();
    header(name, "histogram", help);
    const std::string bucket = std::string(name) + "_bucket";
    for (size_t i = 0; i < s.cumulative.size(); ++i) {
      const std::string le = i < s.upper_bounds.size() ? number(s.upper_bounds[i]) : "+Inf";
      sample(bucket.c_str(), "le=\"" + le + "\"", std::to_string(s.cumulative[i]));
    }
    sample((std::string(name) + "_sum").c_str(), "", number(s.sum));
    sample((std::string(name) + "_count").c_str(), "", std::to_string(s.count));
  }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

}  // namespace

std::string render_metrics(const EngineStats& stats, const EngineMetrics& metrics, const RefusalCounters& refusals) {
  Writer w;
  w.gauge("num_requests_running", "Requests whose sequences are running.", stats.num_running);
  w.gauge("num_requests_waiting", "Requests waiting to be admitted.", stats.num_waiting);
  w.gauge("num_requests_swapped", "Requests swapped out to host memory.", stats.num_swapped);
  w.gauge("sessions_held", "Sessions (session_id) whose KV blocks the engine keeps.", stats.sessions_held);
  w.gauge("session_blocks", "Device KV blocks the kept sessions hold.", stats.session_blocks);
  w.gauge("kv_cache_usage_ratio",
          "Share of KV cache blocks in use: by running sequences and kept sessions (cached free blocks do not count).",
          stats.blocks.usage_ratio());
  w.counter("prompt_tokens_total", "Prompt tokens of accepted requests.", stats.prompt_tokens);
  w.counter("generation_tokens_total", "Generated tokens.", stats.generated_tokens);
  w.counter("iterations_total", "Engine iterations (forward passes).", stats.iterations);

  w.header("request_success_total", "counter", "Requests that finished, by reason.");
  for (FinishReason r : {FinishReason::stop, FinishReason::length, FinishReason::cancelled})
    w.sample("request_success_total", std::string("finished_reason=\"") + to_string(r) + "\"",
             std::to_string(metrics.finished(r)));
  w.counter("request_failure_total", "Requests that ended with an error.",
            metrics.finished(FinishReason::error));
  w.counter("engine_restarts_total", "Engine restarts after a fault (executor, swap or KV allocation).",
            metrics.restarts.load());

  w.header("num_preemptions_total", "counter", "Preemptions, by mode.");
  w.sample("num_preemptions_total", "mode=\"recompute\"", std::to_string(stats.preemptions_recompute));
  w.sample("num_preemptions_total", "mode=\"swap\"", std::to_string(stats.preemptions_swap));
  w.counter("spec_decode_num_drafts_total", "Speculative verify steps, one per sequence and step.",
            stats.spec_drafts);
  w.counter("spec_decode_num_draft_tokens_total", "Draft tokens verified.", stats.spec_draft_tokens);
  w.counter("spec_decode_num_accepted_tokens_total", "Draft tokens accepted.", stats.spec_accepted_tokens);
  w.gauge("spec_decode_draft_acceptance_rate", "Share of the draft tokens verified so far that were accepted.",
          stats.spec_draft_tokens ? double(stats.spec_accepted_tokens) / double(stats.spec_draft_tokens) : 0.0);
  w.counter("prefix_cache_queries_total", "Prompt tokens looked up in the prefix cache.",
            stats.blocks.prefix_query_tokens);
  w.counter("prefix_cache_hits_total", "Prompt tokens found in the prefix cache.",
            stats.blocks.prefix_hit_tokens);

  w.header("http_refused_total", "counter", "Requests and connections the server's limits refused, by reason.");
  for (size_t i = 0; i < kRefusalKinds; ++i) {
    const Refusal r = Refusal(i);
    w.sample("http_refused_total", std::string("reason=\"") + to_string(r) + "\"", std::to_string(refusals.value(r)));
  }

  w.histogram("time_to_first_token_seconds", "Seconds from submission to the first token.",
              metrics.time_to_first_token);
  w.histogram("inter_token_latency_seconds", "Seconds between consecutive tokens of a request.",
              metrics.inter_token_latency);
  w.histogram("e2e_request_latency_seconds", "Seconds from submission to the last event.",
              metrics.e2e_request_latency);
  w.histogram("request_queue_time_seconds", "Seconds from submission to first scheduling.",
              metrics.request_queue_time);
  w.histogram("iteration_tokens", "Tokens per engine iteration.", metrics.iteration_tokens);
  w.histogram("executor_idle_seconds", "Seconds the executor waited between consecutive steps.",
              metrics.executor_idle);
  return w.take();
}

std::string render_grammar_cache_metrics(const ConstraintCompiler::CacheFigures& cache) {
  Writer w;
  w.gauge("grammar_cache_grammars", "Compiled grammars (structured outputs, tool calls) kept for reuse.",
          double(cache.grammars));
  w.gauge("grammar_cache_bytes", "Bytes the kept grammars' token masks and DFAs hold.", double(cache.bytes));
  w.gauge("grammar_cache_max_bytes", "The bound on grammar_cache_bytes (grammar_cache_max_bytes).",
          double(cache.max_bytes));
  w.counter("grammars_compiled_total", "Grammars compiled (cache misses).", cache.compiled);
  w.counter("grammar_cache_hits_total", "Requests whose grammar was in the cache.", cache.hits);
  return w.take();
}

}  // namespace conveyor::http
