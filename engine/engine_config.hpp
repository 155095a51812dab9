// The engine's limits and policies, with their defaults. Settings that name
// a choice are typed: text (a flag, a config file, a program's own) is
// parsed once, at the edge, by the parse_* functions below, whose errors name
// the flag. Not every field is a `conveyor serve` setting: http/serve_settings.hpp
// has the table of the server's flags and config-file keys.
// admission_config, session_ttl_seconds and session_max_share are for
// programs that embed the engine.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/status.hpp"
#include "model/kv_cache.hpp"
#include "policies/admission.hpp"
#include "policies/preemption.hpp"
#include "engine/speculation.hpp"

namespace conveyor {

// What runs the model: the CPU, or CUDA device `index`.
enum class DeviceKind : uint8_t { cpu, cuda };
struct DeviceSpec {
  DeviceKind kind = DeviceKind::cpu;
  int32_t index = 0;  // CUDA device ordinal (0 for the CPU)
  bool operator==(const DeviceSpec&) const = default;
};
// "cpu", "cuda", "cuda:N" (N a decimal ordinal below 1024).
Expected<DeviceSpec> parse_device(std::string_view text);
std::string to_string(const DeviceSpec& device);  // "cpu", "cuda:0"

enum class BatchingMode : uint8_t {
  continuous,  // a finished sequence's slot is refilled at the next iteration
  static_,     // run a batch until its longest member finishes, then admit more
  // As static_, and a finished member keeps its row in the batch, decoding
  // tokens nobody receives, until the batch ends: the fixed batch shape of
  // request-level batching systems (its client has its answer at once).
  static_padded,
};
// "continuous", "static", "static-padded".
Expected<BatchingMode> parse_batching_mode(std::string_view text);
const char* to_string(BatchingMode mode);

// Which waiting request runs first (vLLM's --scheduling-policy).
enum class SchedulingPolicy : uint8_t {
  fcfs,      // first come first served; a request's priority must be 0
  // The lowest GenerateRequest::priority first (first come first served
  // within one value), aged by waiting time (aging_interval_seconds); a more
  // urgent request preempts running less urgent ones when it finds no slot
  // or no KV blocks free.
  priority,
};
// "fcfs", "priority".
Expected<SchedulingPolicy> parse_scheduling_policy(std::string_view text);
const char* to_string(SchedulingPolicy policy);

// After an engine fault: recompute the requests that were running, or end them.
enum class FaultRecovery : uint8_t { recompute, fail };
Expected<FaultRecovery> parse_fault_recovery(std::string_view text);
const char* to_string(FaultRecovery recovery);

// The KV cache's element type; nullopt is "auto" (kv_dtype_of() resolves it).
Expected<std::optional<KvDtype>> parse_kv_cache_dtype(std::string_view text);
std::string to_string(std::optional<KvDtype> dtype);  // "auto" for nullopt

// The defaults of the settings that EngineConfig and the scheduler's own
// config (SchedulerConfig, engine/scheduler_core.hpp) share, written once.
namespace engine_defaults {
inline constexpr int32_t block_size = 16;
inline constexpr int32_t max_num_seqs = 256;
inline constexpr int32_t max_batched_tokens = 2048;
inline constexpr int32_t prefill_chunk = 512;
inline constexpr int32_t max_waiting = 4096;
inline constexpr double aging_interval_seconds = 5.0;
inline constexpr bool overlap = true;
inline constexpr bool prefix_wait = true;
inline constexpr double session_ttl_seconds = 60.0;
inline constexpr int32_t max_fault_retries = 2;
}  // namespace engine_defaults

// The most compute threads an engine takes (EngineConfig::threads, --threads).
inline constexpr int kMaxThreads = 4096;

struct EngineConfig {
  DeviceSpec device;                    // the backend (backends/backend.hpp)
  int32_t block_size = engine_defaults::block_size;  // tokens per KV block (a power of two)
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
  // nullopt (auto): on the CPU bf16 with AVX512-BF16, else f16; on CUDA bf16.
  std::optional<KvDtype> kv_cache_dtype;
  int64_t swap_space_tokens = 0;        // host swap capacity in tokens (0: no swap)
  int32_t max_num_seqs = engine_defaults::max_num_seqs;              // running sequences at once
  int32_t max_batched_tokens = engine_defaults::max_batched_tokens;  // tokens per iteration
  int32_t prefill_chunk = engine_defaults::prefill_chunk;  // longest prefill span per sequence per iteration
  // A target for decoding streams' inter-token gap, ms (0: none): each
  // iteration's token budget and prefill chunks are sized from the measured
  // cost of the engine's own steps so that a step stays near it while long
  // prompts arrive (engine/step_cost.hpp); max_batched_tokens and
  // prefill_chunk stay upper bounds.
  double target_itl_ms = 0.0;
  int32_t max_waiting = engine_defaults::max_waiting;  // waiting-queue bound; past it submit fails (429)
  // The built-in policies; each is also the fallback of a policy actor that
  // fails (actors/policy_actors.hpp).
  PreemptionMode preemption = PreemptionMode::recompute;
  AdmissionMode admission = AdmissionMode::watermark;
  // A policy registered by name (actors/policy_registry.hpp) to run in place
  // of the built-in above; "": the built-in.
  std::string admission_policy;
  std::string preemption_policy;
  // How long the scheduler waits for a policy's answer before it gives up
  // on that policy and asks the built-in instead.
  double policy_timeout_seconds = 0.1;
  BatchingMode batching = BatchingMode::continuous;
  SchedulingPolicy scheduling_policy = SchedulingPolicy::fcfs;
  bool prefix_caching = true;
  // With prefix caching: a request whose leading blocks another request is
  // still computing waits for them rather than computing them again.
  bool prefix_wait = engine_defaults::prefix_wait;
  // Sessions (GenerateRequest::session, HTTP "session_id"): a session's KV
  // blocks are kept this long after its request ends, and all sessions
  // together keep at most this share of the KV blocks (0: sessions keep
  // nothing). Running requests always come first: kept blocks are let go
  // before anything is preempted or turned away.
  double session_ttl_seconds = engine_defaults::session_ttl_seconds;
  double session_max_share = 0.25;
  bool overlap = engine_defaults::overlap;  // plan the next step while one runs (false: one at a time)
  // Speculative decoding (engine/speculation.hpp): drafts proposed from the
  // sequence's own tokens, verified k + 1 positions at a time. A verify
  // step needs its sequence's last token, so no step is planned ahead while
  // a sequence is likely to draft (SchedulerCore::wants_drafts()).
  SpeculativeConfig speculative;
  // Under the priority policy a request gains one priority level per
  // interval since it arrived (waiting or running).
  double aging_interval_seconds = engine_defaults::aging_interval_seconds;
  AdmissionConfig admission_config;     // watermark, percentile, reserve
  int threads = 0;                      // compute threads (0: all cores; at most kMaxThreads)
  // After an engine fault (the executor threw, a swap copy or a KV
  // allocation failed) the workers restart with a fresh KV pool, and the
  // requests that were running are recomputed from their tokens so far
  // (each through at most max_fault_retries restarts) or end with an error
  // that says the engine failed.
  FaultRecovery fault_recovery = FaultRecovery::recompute;
  int32_t max_fault_retries = engine_defaults::max_fault_retries;
  // Faults to inject, for tests (engine/fault_injection.hpp); "": none.
  std::string fault_injection;
};

// Checks ranges; the message names the flag.
Status validate(const EngineConfig& config);

// The KV cache's element type the config asks for, "auto" resolved: bf16 on
// CUDA, the CPU's default_kv_dtype() on the CPU.
KvDtype kv_dtype_of(const EngineConfig& config);

}  // namespace conveyor
