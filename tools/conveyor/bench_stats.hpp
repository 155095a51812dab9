// What `conveyor bench` measured: one record per request, and the summary
// (throughputs, latency percentiles, errors by kind) printed and written as
// JSON. No networking here.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <map>
#include <string>
#include <vector>

#include <boost/json/object.hpp>

namespace conveyor::bench {

// One request as the client saw it. Times are seconds; `start_s` counts from
// the start of the run, the others from the moment the request was sent.
struct RequestResult {
  bool ok = false;
  int http_status = 0;         // 0 when no response header arrived
  std::string error_kind;      // when !ok: "http 429", "connect", "io", "stream error", "incomplete"
  std::string error_message;
  int64_t input_tokens = 0;    // usage.prompt_tokens, else the prompt's length in ids
  int64_t output_tokens = 0;   // usage.completion_tokens, else tokens counted in chunks
  double start_s = 0;
  double ttft_s = 0;           // to the first chunk that carried a token
  double e2e_s = 0;            // to the end of the stream
  std::vector<double> itl_s;   // one per token after the first: chunk gap / tokens in the chunk
  std::string finish_reason;
};

// mean and percentiles (linear interpolation between closest ranks, as
// numpy's default); all zero for no samples.
struct Distribution {
  size_t count = 0;
  double mean = 0, min = 0, p50 = 0, p90 = 0, p99 = 0, max = 0;
  static Distribution of(std::vector<double> samples);
};
double percentile(const std::vector<double>& sorted, double p);  // p in [0, 100]

struct Summary {
  int64_t completed = 0;
  int64_t failed = 0;
  double duration_s = 0;
  int64_t total_input_tokens = 0;
  int64_t total_output_tokens = 0;
  double request_throughput = 0;  // completed requests / s
  double output_throughput = 0;   // output tokens / s
  double input_throughput = 0;    // input tokens / s
  Distribution ttft_ms, itl_ms, tpot_ms, e2e_ms;
  // The 0th, 1st, ..., 100th percentiles of ITL (empty without samples): the
  // whole distribution for a report's CDF, in 101 numbers rather than one
  // per token.
  std::vector<double> itl_ms_quantiles;
  std::map<std::string, int64_t> errors;  // error kind -> count
  std::map<std::string, int64_t> finish_reasons;
};

// `duration_s`: wall time of the whole run.
Summary summarize(const std::vector<RequestResult>& results, double duration_s);

// {"config": config, "summary": {...}, "errors": {...}, "requests": [...]}.
boost::json::object to_json(const Summary& s, const boost::json::object& config,
                            const std::vector<RequestResult>& results);
// The human-readable table; `title_lines` are printed under the heading.
void print_report(std::ostream& os, const Summary& s, const std::vector<std::string>& title_lines);

}  // namespace conveyor::bench
