// The CUDA backend's Embedder (engine/embedder.hpp): the runner's forward
// pass (backends/cuda/cuda_forward.hpp) run to the final norm on the
// weights the runner uploaded, on a stream, a cuBLAS handle, activations
// and a KV cache of its own, so a batch of embeddings runs beside the
// engine's steps on the device. Its hidden states come back to the host,
// which pools and normalises them as the CPU embedder does.
//
// Inputs run in batches of whole inputs, up to kBatchTokens tokens per
// pass (an input longer than that runs alone), each input in its own
// blocks. Its activations and KV cache are allocated at the first call and
// grown to the largest batch seen, outside the KV pool's budget (out of
// what --gpu-memory-utilization leaves free: a server that never embeds
// pays nothing, and a failed allocation is an error for that request
// alone). Nothing is cached between inputs.
//
// This header includes nothing from CUDA.
#pragma once

#include <memory>
#include <mutex>
#include <vector>

#include "base/status.hpp"
#include "engine/embedder.hpp"
#include "model/kv_cache.hpp"

namespace conveyor {

namespace cuda {
struct DeviceModel;
}

class CudaEmbedder final : public Embedder {
 public:
  static constexpr int32_t kBatchTokens = 512;
  static constexpr int32_t kBlockSize = 16;

  // The stream and the handle (memory comes at the first call); errors
  // (unsupported) name the device.
  static Expected<std::shared_ptr<CudaEmbedder>> create(int32_t device, std::shared_ptr<const cuda::DeviceModel> model,
                                                        KvDtype kv_dtype);
  ~CudaEmbedder() override;

  int32_t dim() const override;
  Expected<std::vector<std::vector<float>>> embed(const std::vector<std::vector<int32_t>>& inputs,
                                                  Pooling pooling) override;

 private:
  struct Impl;
  explicit CudaEmbedder(std::unique_ptr<Impl> impl);

  std::mutex mutex_;  // one embed() at a time
  std::unique_ptr<Impl> impl_;
};

}  // namespace conveyor
