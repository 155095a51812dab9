// CUDA entry points of a build with CUDA (backends/cuda/cuda_backend.hpp), and the
// CUDA backend's factory (backends/backend.hpp).
#include "backends/cuda/cuda_backend.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "backends/backend.hpp"
#include "backends/cuda/cuda_embedder.hpp"
#include "backends/cuda/cuda_limits.hpp"
#include "backends/cuda/cuda_memory.hpp"
#include "backends/cuda/cuda_runner.hpp"

namespace conveyor {

bool cuda_compiled_in() { return true; }

Status check_cuda_device(int32_t index) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  const std::string flag = "--device cuda:" + std::to_string(index);
  if (e != cudaSuccess)
    return make_error(Errc::unsupported, flag + ": no usable CUDA device (cudaGetDeviceCount: " +
                                             cudaGetErrorString(e) + ")");
  if (count == 0) return make_error(Errc::unsupported, flag + ": no CUDA device on this machine");
  if (index >= count)
    return make_error(Errc::invalid_argument, flag + ": this machine has " + std::to_string(count) +
                                                  " CUDA device(s), 0 to " + std::to_string(count - 1));
  return Status::ok();
}

Expected<Backend> make_cuda_backend(const EngineConfig& config, LoadedModel model) {
  const DeviceSpec* spec = &config.device;
  if (spec->kind != DeviceKind::cuda)
    return make_error(Errc::invalid_argument, "make_cuda_backend: device '" + to_string(*spec) + "' is not CUDA");
  const int32_t device = spec->index;
  const std::string flag = "--device " + to_string(*spec);
  if (Status s = check_cuda_device(device); !s) return s.error();
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, device) != cudaSuccess) prop.name[0] = '\0';

  Backend b;
  b.kv_dtype = kv_dtype_of(config);
  if (Status s = check_kv_dtype(b.kv_dtype, model.config); !s) return s.error();
  // Before any upload: a shape the kernels cannot run is refused here, not at the first step.
  const int64_t block_bytes =
      int64_t(KvCacheShape::for_model(model.config, config.block_size, 0, b.kv_dtype).block_bytes());
  if (Status s = check_cuda_kernel_limits(model.config, config.max_batched_tokens, block_bytes); !s)
    return s.error();
  const std::string types = weight_types(model.weights);
  CudaStepLimits limits;
  limits.max_tokens = config.max_batched_tokens;
  // A row needs a token of the step; verify spans (speculation, jump-forward)
  // add their drafts' rows while at most disable_batch sequences decode.
  const int32_t draft_rows =
      config.speculative.drafts() ? config.speculative.disable_batch * config.speculative.num_tokens : 0;
  limits.max_rows = std::min(config.max_num_seqs + draft_rows, config.max_batched_tokens);
  limits.max_seqs = config.max_num_seqs;
  limits.max_context = model.config.context_length;
  limits.block_size = config.block_size;
  auto runner = CudaStepRunner::create(device, model.config, std::move(model.weights), limits);
  if (!runner) return runner.error();
  b.weights_description = format_bytes((*runner)->weight_bytes()) + " as BF16 on " + prop.name +
                          " (cuBLAS products; stored as " + types + ")";
  auto embedder = CudaEmbedder::create(device, (*runner)->device_model(), b.kv_dtype);
  if (!embedder) return embedder.error();
  b.embedder = std::move(embedder).value();

  size_t free = 0, total = 0;
  if (cudaError_t e = cudaMemGetInfo(&free, &total); e != cudaSuccess)
    return make_error(Errc::unsupported, flag + ": cudaMemGetInfo: " + cudaGetErrorString(e));
  // vLLM's rule: this process may hold `utilization` of the device's memory;
  // the pool gets what is left of it after everything in use now (the
  // weights, the workspace, the CUDA context, and any other process's).
  const int64_t in_use = int64_t(total) - int64_t(free);
  const int64_t budget = int64_t(config.gpu_memory_utilization * double(total)) - in_use;

  KvCapacityRequest request = kv_capacity_request(config, model.config, b.kv_dtype);
  request.fraction = 1.0;
  request.available = std::max<int64_t>(budget, 0);
  // Sized by the share unless --kv-cache-tokens or --kv-cache-memory says otherwise.
  const bool by_share = config.kv_cache_tokens == 0 && config.kv_cache_memory == 0;
  char u[32];
  std::snprintf(u, sizeof u, "%.2f", config.gpu_memory_utilization);
  const std::string share = std::string("--gpu-memory-utilization ") + u + " of " + format_bytes(int64_t(total));
  if (by_share && budget < request.token_bytes * config.block_size)
    return make_error(Errc::resource_exhausted,
                      flag + ": " + share + " leaves no room for the KV cache: " + format_bytes(in_use) +
                          " is in use after the weights (" + format_bytes((*runner)->weight_bytes()) +
                          ") and the workspace; raise it or give --kv-cache-memory");
  auto capacity = plan_kv_capacity(request);
  if (!capacity) return capacity.error();
  b.capacity = std::move(capacity).value();
  if (by_share) b.capacity.origin = share + ", " + format_bytes(in_use) + " in use after the weights: " + b.capacity.origin;

  const int32_t n_blocks = int32_t(b.capacity.tokens / config.block_size);
  auto kv = KvCache::create(KvCacheShape::for_model(model.config, config.block_size, n_blocks, b.kv_dtype),
                            cuda_device_allocator(device));
  if (!kv) return make_error(Errc::resource_exhausted, flag + ": the KV pool: " + kv.error().message);
  (*runner)->attach(*kv);
  if (config.swap_space_tokens >= config.block_size) {
    auto host = KvCache::create(KvCacheShape::for_model(model.config, config.block_size,
                                                        int32_t(config.swap_space_tokens / config.block_size),
                                                        b.kv_dtype),
                                cuda_pinned_allocator());
    if (!host) return make_error(Errc::resource_exhausted, flag + ": swap space (pinned host memory): " + host.error().message);
    try {
      b.swap = std::make_shared<CudaSwapEngine>(device, *kv, *host);
    } catch (const std::exception& e) {
      return make_error(Errc::unsupported, flag + ": the swap engine: " + e.what());
    }
  }
  b.runner = std::shared_ptr<StepRunner>(std::move(*runner));
  return b;
}

}  // namespace conveyor
