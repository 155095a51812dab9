// Copies KV blocks between device memory and host swap space.
//
// The swap actor owns a SwapEngine and runs each order on its own thread, so
// copies overlap the executor's forward pass. On CPU both sides are host
// memory and a copy is a memcpy per block (a block is contiguous across
// layers, model/kv_cache.hpp); CpuSwapEngine is the only engine. Planned, not
// built: a CUDA engine whose copy() runs cudaMemcpyAsync on a stream of its
// own and waits on that stream only, so the compute stream keeps running.
//
// Safety: the scheduler only orders copies of blocks that no step plan
// touches until the copy's completion has been reported.
#pragma once

#include <memory>

#include "actors/engine_types.hpp"
#include "model/kv_cache.hpp"

namespace conveyor {

class SwapEngine {
 public:
  virtual ~SwapEngine() = default;
  // Copies the order's blocks and returns when they have landed.
  virtual void copy(const SwapOrder& order) = 0;
};

class CpuSwapEngine final : public SwapEngine {
 public:
  CpuSwapEngine(std::shared_ptr<KvCache> device, int32_t num_host_blocks);
  void copy(const SwapOrder& order) override;

 private:
  std::shared_ptr<KvCache> device_;
  KvCache host_;  // same block shape, num_host_blocks blocks
};

}  // namespace conveyor
