// The CPU backend's SwapEngine (engine/swap_engine.hpp): host memory of the
// device pool's shape, one memcpy per block on the calling thread.
#pragma once

#include <memory>

#include "engine/swap_engine.hpp"
#include "model/kv_cache.hpp"

namespace conveyor {

class CpuSwapEngine final : public SwapEngine {
 public:
  // The host pool is host memory of the device pool's shape, num_host_blocks blocks.
  CpuSwapEngine(std::shared_ptr<KvCache> device, int32_t num_host_blocks);
  void submit(const SwapOrder& order, Done done) override;

 private:
  std::shared_ptr<KvCache> device_;
  KvCache host_;
};

}  // namespace conveyor
