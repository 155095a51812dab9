// Backends: what runs the model below the engine's actors.
//
// A backend is a StepRunner (weights, KV pool, forward pass, samplers) and a
// SwapEngine (host swap space and its copies), sized from an EngineConfig.
// The scheduler, block manager and policies never see which one runs.
// EngineConfig::device names it: "cpu", or "cuda" / "cuda:N". Each has a
// factory; Engine::create(sys, config, model) calls the one that
// config.device names, and Engine::create(sys, config, info, runner, swap)
// takes a backend of the caller's own.
//
// The CUDA factory exists in every build. Without CUDA compiled in
// (CONVEYOR_CUDA, CMakeLists.txt), or without a usable device, it returns an
// error that says which. Where both exist it builds a CudaStepRunner and a
// CudaSwapEngine (backends/cuda/cuda_runner.hpp): weights as bf16 on the device, a
// device KV pool sized from gpu_memory_utilization (unless kv_cache_tokens
// or kv_cache_memory say otherwise) and swap space in pinned host memory.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "engine/embedder.hpp"
#include "engine/engine_config.hpp"
#include "engine/kv_capacity.hpp"
#include "engine/step_runner.hpp"
#include "engine/swap_engine.hpp"
#include "model/formats/loader.hpp"
#include "base/status.hpp"

namespace conveyor {

// What a backend hands the engine.
struct Backend {
  std::shared_ptr<StepRunner> runner;
  std::shared_ptr<SwapEngine> swap;  // null: no swap space (swap preemption recomputes)
  std::shared_ptr<Embedder> embedder;  // null: this backend computes no embeddings
  KvCapacity capacity;               // the KV pool's tokens, bytes and origin
  KvDtype kv_dtype = KvDtype::f32;   // the pool's element type ("auto" resolved)
  std::string weights_description;   // "74.4 MiB as Q6_K, Q4_K (avx512-vnni products)"
};

// Builds a backend for `model` from a valid config: the weights in the
// runner, a KV pool as engine/kv_capacity.hpp sizes it, and swap space of
// config.swap_space_tokens (none below one block).
using BackendFactory = Expected<Backend> (*)(const EngineConfig& config, LoadedModel model);

Expected<Backend> make_cpu_backend(const EngineConfig& config, LoadedModel model);
Expected<Backend> make_cuda_backend(const EngineConfig& config, LoadedModel model);

// The capacity request of `config`'s KV flags for `model` with `dtype`
// elements; the caller adds what memory is available and the share to take.
KvCapacityRequest kv_capacity_request(const EngineConfig& config, const ModelConfig& model, KvDtype dtype);

// Whether the KV cache can store `model`'s heads as `dtype` (q8_0: heads of
// whole 32-value blocks); the error names the flag and the head size.
Status check_kv_dtype(KvDtype dtype, const ModelConfig& model);

// The storage types of a model's matrices, in a fixed order: "Q4_K, Q6_K".
std::string weight_types(const ModelWeights& weights);

// The factory for a device.
BackendFactory backend_factory(const DeviceSpec& device);

// Whether this build and machine can run on `device`, checked before any
// weights are touched: ok for the CPU; for CUDA an error that says what is
// missing (CUDA support in this build, a device, that ordinal).
Status check_device(const DeviceSpec& device);

}  // namespace conveyor
