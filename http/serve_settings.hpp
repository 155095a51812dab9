// Everything `conveyor serve` is configured with: the model, the server's
// options and the engine's limits and policies, loadable from a TOML file
// (examples in configs/serve*.toml), most of them overridden by command-line
// flags.
//
//   model = "dummy:llama-15m"          # top level: model, tokenizer
//   [server]  host, port, api_key, api_key_file, served_model_name,
//             chat_template, max_body_bytes, max_output_bytes, io_threads,
//             header_timeout (seconds), idle_timeout_seconds, max_connections,
//             ws_max_messages_per_second, shutdown_timeout (seconds),
//             log_level, log_format, log_stats_interval (seconds)
//   [engine]  device, block_size, kv_cache_tokens, kv_cache_memory (bytes, or a
//             size string such as "4GiB"), kv_cache_memory_fraction,
//             gpu_memory_utilization,
//             kv_cache_dtype, swap_space_tokens, max_num_seqs,
//             max_batched_tokens, prefill_chunk, max_waiting, preemption,
//             admission, batching, prefix_caching, overlap,
//             aging_interval_seconds, threads
//
// Keys use underscores where the flags use dashes; io_threads,
// prefix_caching and aging_interval_seconds have no flag, and
// idle_timeout_seconds is --idle-timeout. An unknown key or table, or a value of the wrong type or out of
// range, is an error naming it (shutdown_grace_seconds, which
// shutdown_timeout replaced, names its successor).
#pragma once

#include <string>

#include "engine/engine_config.hpp"
#include "http/server_options.hpp"
#include "base/status.hpp"

namespace conveyor::http {

struct ServeSettings {
  std::string model;      // as for `conveyor generate --model` ("": the embedded default)
  std::string tokenizer;  // llama2.c tokenizer file ("": none)
  ServerOptions server;
  EngineConfig engine;
};

// Keys present in the file replace the values in `settings`.
Status load_serve_config(const std::string& path, ServeSettings& settings);
// The same from TOML text (`source` names it in messages).
Status parse_serve_config(std::string_view toml_text, const std::string& source, ServeSettings& settings);

// The server options' ranges, whatever set them (file, flags, a program):
// timeouts more than 0, io_threads 1 or more, ws_max_messages_per_second 0
// or more. The error names the flag.
Status validate_server_options(const ServerOptions& options);

}  // namespace conveyor::http
