#include "backends/cuda/cuda_memory.hpp"

#include <cuda_runtime_api.h>

#include <cstring>

namespace conveyor {
namespace {

class DeviceAllocator final : public KvAllocator {
 public:
  explicit DeviceAllocator(int32_t device) : device_(device) {}
  std::byte* allocate(size_t bytes) override {
    if (cudaSetDevice(device_) != cudaSuccess) return nullptr;
    void* p = nullptr;
    if (cudaMalloc(&p, bytes) != cudaSuccess) return nullptr;
    // cudaMemset runs on the legacy default stream, with which the
    // runner's and the swap engine's non-blocking streams do not
    // synchronize: wait for it here, so that no later work on them can
    // overtake it (once, at start-up).
    if (cudaMemset(p, 0, bytes) != cudaSuccess || cudaDeviceSynchronize() != cudaSuccess) {
      cudaFree(p);
      return nullptr;
    }
    return static_cast<std::byte*>(p);
  }
  void deallocate(std::byte* p, size_t) override {
    cudaSetDevice(device_);
    cudaFree(p);
  }
  KvMemory memory() const override { return KvMemory::device; }

 private:
  int32_t device_;
};

class PinnedAllocator final : public KvAllocator {
 public:
  std::byte* allocate(size_t bytes) override {
    void* p = nullptr;
    if (cudaHostAlloc(&p, bytes, cudaHostAllocPortable) != cudaSuccess) return nullptr;
    std::memset(p, 0, bytes);
    return static_cast<std::byte*>(p);
  }
  void deallocate(std::byte* p, size_t) override { cudaFreeHost(p); }
  KvMemory memory() const override { return KvMemory::pinned_host; }
};

}  // namespace

std::shared_ptr<KvAllocator> cuda_device_allocator(int32_t device) {
  return std::make_shared<DeviceAllocator>(device);
}

std::shared_ptr<KvAllocator> cuda_pinned_allocator() { return std::make_shared<PinnedAllocator>(); }

}  // namespace conveyor
