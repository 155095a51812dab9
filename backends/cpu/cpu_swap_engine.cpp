#include "backends/cpu/cpu_swap_engine.hpp"

#include <chrono>
#include <cstring>
#include <future>

namespace conveyor {

namespace {
KvCacheShape with_blocks(KvCacheShape shape, int32_t n) {
  shape.n_blocks = n;
  return shape;
}
}  // namespace

CpuSwapEngine::CpuSwapEngine(std::shared_ptr<KvCache> device, int32_t num_host_blocks)
    : device_(std::move(device)), host_(with_blocks(device_->shape(), num_host_blocks)) {}

void CpuSwapEngine::submit(const SwapOrder& order, Done done) {
  const auto start = std::chrono::steady_clock::now();
  const size_t bytes = device_->shape().block_bytes();
  for (const auto& [from, to] : order.blocks) {
    if (order.direction == SwapDirection::out)
      std::memcpy(host_.block_data(to), device_->block_data(from), bytes);
    else
      std::memcpy(device_->block_data(to), host_.block_data(from), bytes);
  }
  done(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
}

}  // namespace conveyor
