#include "engine/engine_config.hpp"

#include <charconv>
#include <limits>

#include "engine/fault_injection.hpp"

namespace conveyor {

Expected<DeviceSpec> parse_device(std::string_view text) {
  auto bad = [&] {
    return make_error(Errc::invalid_argument, "must be cpu, cuda or cuda:N, not '" + std::string(text) + "'");
  };
  if (text == "cpu") return DeviceSpec{DeviceKind::cpu, 0};
  if (text == "cuda") return DeviceSpec{DeviceKind::cuda, 0};
  constexpr std::string_view kCuda = "cuda:";
  if (!text.starts_with(kCuda)) return bad();
  const std::string_view digits = text.substr(kCuda.size());
  int32_t index = -1;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
  if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size() || index < 0 ||
      index >= 1024)
    return bad();
  return DeviceSpec{DeviceKind::cuda, index};
}

std::string to_string(const DeviceSpec& d) {
  return d.kind == DeviceKind::cpu ? "cpu" : "cuda:" + std::to_string(d.index);
}

Expected<BatchingMode> parse_batching_mode(std::string_view text) {
  if (text == "continuous") return BatchingMode::continuous;
  if (text == "static") return BatchingMode::static_;
  if (text == "static-padded") return BatchingMode::static_padded;
  return make_error(Errc::invalid_argument, "unknown batching mode '" + std::string(text) +
                                                "' (expected continuous, static or static-padded)");
}

Expected<SchedulingPolicy> parse_scheduling_policy(std::string_view text) {
  if (text == "fcfs") return SchedulingPolicy::fcfs;
  if (text == "priority") return SchedulingPolicy::priority;
  return make_error(Errc::invalid_argument, "unknown scheduling policy '" + std::string(text) +
                                                "' (expected fcfs or priority)");
}

const char* to_string(SchedulingPolicy policy) {
  return policy == SchedulingPolicy::priority ? "priority" : "fcfs";
}

const char* to_string(BatchingMode mode) {
  switch (mode) {
    case BatchingMode::continuous: return "continuous";
    case BatchingMode::static_: return "static";
    case BatchingMode::static_padded: return "static-padded";
  }
  return "unknown";
}

Expected<FaultRecovery> parse_fault_recovery(std::string_view text) {
  if (text == "recompute") return FaultRecovery::recompute;
  if (text == "fail") return FaultRecovery::fail;
  return make_error(Errc::invalid_argument, "must be recompute or fail, not '" + std::string(text) + "'");
}

const char* to_string(FaultRecovery recovery) {
  return recovery == FaultRecovery::recompute ? "recompute" : "fail";
}

Expected<std::optional<KvDtype>> parse_kv_cache_dtype(std::string_view text) {
  if (text == "auto") return std::optional<KvDtype>{};
  if (auto d = parse_kv_dtype(text)) return std::optional<KvDtype>{*d};
  return make_error(Errc::invalid_argument, "must be f32, f16, bf16, q8_0 or auto, not '" + std::string(text) + "'");
}

std::string to_string(std::optional<KvDtype> dtype) { return dtype ? to_string(*dtype) : "auto"; }

Status validate(const EngineConfig& c) {
  auto bad = [](const std::string& field, const std::string& why) {
    return Status(make_error(Errc::invalid_argument, "--" + field + ": " + why));
  };
  if (c.block_size < 1 || c.block_size > 1024 || (c.block_size & (c.block_size - 1)) != 0)
    return bad("block-size", "must be a power of two between 1 and 1024");
  if (c.kv_cache_tokens != 0 && c.kv_cache_tokens < c.block_size)
    return bad("kv-cache-tokens", "must hold at least one block");
  if (c.kv_cache_memory < 0) return bad("kv-cache-memory", "must be >= 0");
  if (c.kv_cache_tokens != 0 && c.kv_cache_memory != 0)
    return bad("kv-cache-memory", "give --kv-cache-tokens or --kv-cache-memory, not both");
  if (!(c.kv_cache_memory_fraction > 0.0 && c.kv_cache_memory_fraction <= 1.0))
    return bad("kv-cache-memory-fraction", "must be in (0, 1]");
  if (!(c.gpu_memory_utilization > 0.0 && c.gpu_memory_utilization <= 1.0))
    return bad("gpu-memory-utilization", "must be in (0, 1]");
  if (c.swap_space_tokens < 0) return bad("swap-space-tokens", "must be >= 0");
  if (c.swap_space_tokens / c.block_size > std::numeric_limits<int32_t>::max())
    return bad("swap-space-tokens", "holds " + std::to_string(c.swap_space_tokens / c.block_size) +
                                        " blocks; at most " + std::to_string(std::numeric_limits<int32_t>::max()));
  if (c.max_num_seqs < 1) return bad("max-num-seqs", "must be >= 1");
  // libgomp ends the process when it cannot create a team's threads.
  if (c.threads < 0 || c.threads > kMaxThreads)
    return bad("threads", "must be between 0 (all cores) and " + std::to_string(kMaxThreads));
  if (c.max_batched_tokens < 1) return bad("max-batched-tokens", "must be >= 1");
  if (c.prefill_chunk < 1) return bad("prefill-chunk", "must be >= 1");
  if (!(c.target_itl_ms >= 0) || c.target_itl_ms > 1e6) return bad("target-itl-ms", "must be between 0 and 1e6");
  if (c.max_waiting < 0) return bad("max-waiting", "must be >= 0");
  if (c.max_fault_retries < 0) return bad("max-fault-retries", "must be >= 0");
  // Settings of the config file only ([engine] keys), named as there.
  auto bad_key = [](const std::string& key, const std::string& why) {
    return Status(make_error(Errc::invalid_argument, "engine." + key + ": " + why));
  };
  if (!(c.session_ttl_seconds > 0) || c.session_ttl_seconds > 1e9)
    return bad_key("session_ttl_seconds", "must be more than 0 and at most 1e9 seconds");
  if (!(c.session_max_share >= 0 && c.session_max_share <= 1))
    return bad_key("session_max_share", "must be in [0, 1]");
  if (!(c.aging_interval_seconds >= 0) || c.aging_interval_seconds > 1e9)
    return bad_key("aging_interval_seconds", "must be 0 (no aging) to 1e9 seconds");
  if (!(c.policy_timeout_seconds > 0 && c.policy_timeout_seconds <= 3600))
    return bad("policy-timeout", "must be more than 0 and at most 3600 seconds");
  if (auto f = FaultInjector::parse(c.fault_injection); !f) return f.error();
  if (Status st = validate(c.speculative); !st) return st;
  if (c.speculative.enabled() && c.speculative.method == SpeculativeMethod::draft && c.device.kind == DeviceKind::cuda)
    return bad("speculative", "draft:FILE is not supported with --device cuda yet (the draft model runs in the CPU "
                              "runner); ngram and suffix are");
  return Status::ok();
}

KvDtype kv_dtype_of(const EngineConfig& c) {
  if (c.kv_cache_dtype) return *c.kv_cache_dtype;
  return c.device.kind == DeviceKind::cuda ? KvDtype::bf16 : default_kv_dtype();
}

}  // namespace conveyor
