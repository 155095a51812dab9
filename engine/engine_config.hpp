// The engine's limits and policies, with their defaults. Not every field is a
// `conveyor serve` flag: `conveyor serve --help` lists the flags (named as
// the fields, with dashes) and http/serve_settings.hpp the keys of its config
// file. admission_config is neither: the server keeps its defaults, and a
// program that embeds the engine sets it here.
#pragma once

#include <cstdint>
#include <string>

#include "model/kv_cache.hpp"
#include "base/status.hpp"
#include "policies/admission.hpp"

namespace conveyor {

struct EngineConfig {
  // The backend: "cpu", or "cuda" / "cuda:N" for CUDA device N (0 when not
  // given). parse_device() (backends/backend.hpp) reads it; validate() checks
  // its form, Engine::create whether this build and machine can use it.
  std::string device = "cpu";
  int32_t block_size = 16;              // tokens per KV block (a power of two)
  // Device KV capacity (engine/kv_capacity.hpp): kv_cache_tokens when not 0
  // (rounded down to blocks), else kv_cache_memory bytes when not 0, else
  // kv_cache_memory_fraction of the memory available once the weights are
  // loaded, between one full context and context_length × max_num_seqs tokens.
  int64_t kv_cache_tokens = 0;
  int64_t kv_cache_memory = 0;
  double kv_cache_memory_fraction = 0.5;
  // On CUDA, in place of kv_cache_memory_fraction: the share of the device's
  // memory this engine may hold in all; the KV pool gets what the weights
  // and the activation workspace leave of it (backends/backend.hpp).
  double gpu_memory_utilization = 0.9;
  // f32 | f16 | bf16 | auto (on the CPU: bf16 with AVX512-BF16, else f16; on CUDA: bf16)
  std::string kv_cache_dtype = "auto";
  int64_t swap_space_tokens = 0;        // host swap capacity in tokens (0: no swap)
  int32_t max_num_seqs = 256;           // running sequences at once
  int32_t max_batched_tokens = 2048;    // tokens per iteration
  int32_t prefill_chunk = 512;          // longest prefill span per sequence per iteration
  int32_t max_waiting = 4096;           // waiting-queue bound; past it submit fails (429)
  std::string preemption = "recompute"; // recompute | swap | cost
  std::string admission = "watermark";  // conservative | watermark | profiled
  std::string batching = "continuous";  // continuous | static | static-padded
  bool prefix_caching = true;
  // With prefix caching: a request whose leading blocks another request is
  // still computing waits for them rather than computing them again.
  bool prefix_wait = true;
  // Sessions (GenerateRequest::session, HTTP "session_id"): a session's KV
  // blocks are kept this long after its request ends, and all sessions
  // together keep at most this share of the KV blocks (0: sessions keep
  // nothing). Running requests always come first: kept blocks are let go
  // before anything is preempted or turned away.
  double session_ttl_seconds = 60.0;
  double session_max_share = 0.25;
  bool overlap = true;                  // plan the next step while one runs (false: one at a time)
  double aging_interval_seconds = 5.0;  // a waiting request gains one priority level per interval
  AdmissionConfig admission_config;     // watermark, percentile, reserve
  int threads = 0;                      // compute threads (0: all cores)
  // After an engine fault (the executor threw, a swap copy or a KV
  // allocation failed) the workers restart with a fresh KV pool, and the
  // requests that were running are recomputed from their tokens so far
  // ("recompute", each through at most max_fault_retries restarts) or end
  // with an error that says the engine failed ("fail").
  std::string fault_recovery = "recompute";
  int32_t max_fault_retries = 2;
  // Faults to inject, for tests (engine/fault_injection.hpp); "": none.
  std::string fault_injection;
};

// Checks ranges and names; the message names the field.
Status validate(const EngineConfig& config);

// The KV cache's element type the config asks for ("auto": bf16 on CUDA, the
// CPU's default_kv_dtype() on the CPU). The config must be valid.
KvDtype kv_dtype_of(const EngineConfig& config);

}  // namespace conveyor
