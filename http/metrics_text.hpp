// GET /metrics: the engine's state and history in Prometheus text format
// (version 0.0.4), every name prefixed `conveyor:` as vLLM prefixes `vllm:`.
//
//   gauges      num_requests_running, num_requests_waiting, num_requests_swapped,
//               kv_cache_usage_ratio (blocks held by running sequences and kept
//               sessions / all blocks; cached free blocks do not count)
//   counters    prompt_tokens_total (of accepted requests, counted at submit),
//               generation_tokens_total, iterations_total,
//               request_success_total{finished_reason="stop"|"length"|"cancelled"},
//               request_failure_total, num_preemptions_total{mode="recompute"|"swap"},
//               prefix_cache_queries_total, prefix_cache_hits_total (in tokens),
//               http_refused_total{reason="rate_limit"|"concurrency"|"connections"|
//                 "header_timeout"|"idle_timeout"|"ws_message_size"|"ws_rate"|
//                 "body_size"|"header_size"|"output_size"}
//                 (what the server's limits turned away: http/refusal_counters.hpp)
//   histograms  time_to_first_token_seconds, inter_token_latency_seconds,
//               e2e_request_latency_seconds, request_queue_time_seconds, iteration_tokens,
//               executor_idle_seconds
//
// With structured outputs (a model with a tokenizer), the compiled-grammar
// cache (http/constraint_compiler.hpp): gauges grammar_cache_grammars,
// grammar_cache_bytes, grammar_cache_max_bytes; counters
// grammars_compiled_total, grammar_cache_hits_total.
//
// Note: `promtool check metrics` parses this cleanly; its style lint reports
// that names should not contain ':' (colons are meant for recording rules),
// which is the naming this API asks for.
#pragma once

#include <string>

#include "engine/engine_types.hpp"
#include "engine/metrics.hpp"
#include "http/constraint_compiler.hpp"
#include "http/refusal_counters.hpp"

namespace conveyor::http {

std::string render_metrics(const EngineStats& stats, const EngineMetrics& metrics, const RefusalCounters& refusals);
std::string render_grammar_cache_metrics(const ConstraintCompiler::CacheFigures& cache);

}  // namespace conveyor::http
