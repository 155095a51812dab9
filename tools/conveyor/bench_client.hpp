// The load generator's network side: drives a conveyor (or any
// OpenAI-compatible) server with streaming requests over Boost.Beast.
//
// One io_context on one thread runs everything: many connections, each
// request an asynchronous chain (connect, write, read header, read the SSE
// body piece by piece), so no thread blocks per request and chunk arrival
// times are taken the moment the bytes are parsed. Finished connections that
// the server keeps alive go back to a pool and are reused; a reused
// connection the server has closed in the meantime is retried once on a
// fresh one.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/status.hpp"
#include "tools/conveyor/bench_metrics.hpp"
#include "tools/conveyor/bench_request.hpp"
#include "tools/conveyor/bench_stats.hpp"
#include "tools/conveyor/bench_workload.hpp"

namespace conveyor::bench {

struct LoadPlan {
  ServerUrl url;
  Endpoint endpoint = Endpoint::completions;
  RequestOptions options;
  int64_t num_requests = 0;   // requests to send; 0: no limit (duration_s must be set)
  double duration_s = 0;      // stop sending after this long; 0: no limit
  int64_t concurrency = 1;    // closed loop: this many requests in flight;
                              // with rate > 0, a cap on requests in flight (0: none)
  double rate = 0;            // > 0: Poisson arrivals, requests per second
  uint64_t seed = 0;          // for the arrival times
  double timeout_s = 600;     // per network operation (connect, a write, one read)
  double metrics_interval_s = 0;  // > 0: poll GET /metrics this often during the run
};

// A snapshot for the progress line.
struct Progress {
  double elapsed_s = 0;
  int64_t sent = 0;
  int64_t completed = 0;
  int64_t failed = 0;
  int64_t in_flight = 0;
  int64_t output_tokens = 0;  // streamed so far, all requests
};
using ProgressFn = std::function<void(const Progress&)>;

struct LoadResult {
  std::vector<RequestResult> results;  // in the order requests were sent
  double duration_s = 0;               // from the first send to the last completion
  bool interrupted = false;            // SIGINT/SIGTERM stopped it early
  MetricsSeries metrics;               // the server's gauges over the run (metrics_interval_s > 0)
};

// Runs the plan to the end (or until SIGINT/SIGTERM, after which requests in
// flight are abandoned and left out). `progress` is called about once a
// second from the client's thread.
LoadResult run_load(const LoadPlan& plan, WorkloadSource& workload, const ProgressFn& progress);

// GET {prefix}/v1/models: the ids the server lists. An error says what went
// wrong (the server cannot be reached, answers with an error status, or
// something that is not a model list).
Expected<std::vector<std::string>> fetch_models(const ServerUrl& url, double timeout_s);

}  // namespace conveyor::bench
