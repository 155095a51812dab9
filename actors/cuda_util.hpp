// Small CUDA helpers for the CUDA backend's host code (cuda_runner.cpp,
// cuda_swap.cpp, cuda_backend.cpp): errors as exceptions, and grow-only
// device and pinned host buffers. Included only where CUDA is compiled in.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <stdexcept>
#include <string>
#include <utility>

namespace conveyor::cuda {

// Throws std::runtime_error naming `what` and CUDA's reason (an engine fault:
// the executor reports it and the scheduler restarts the workers).
inline void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}
inline void check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(std::string(what) + ": cuBLAS status " + std::to_string(int(s)));
}

// Device memory that only grows. reserve() frees the old memory, so the
// caller makes sure no queued work still uses it (the runner's stream is idle
// between steps).
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  ~DeviceBuffer() { cudaFree(p_); }
  DeviceBuffer(DeviceBuffer&& o) noexcept : p_(std::exchange(o.p_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&&) = delete;
  void reserve(size_t bytes) {
    if (bytes <= bytes_) return;
    cudaFree(p_);
    p_ = nullptr;
    bytes_ = 0;
    check(cudaMalloc(&p_, bytes), "cudaMalloc");
    bytes_ = bytes;
  }
  template <class T = void>
  T* get() const {
    return static_cast<T*>(p_);
  }
  size_t bytes() const { return bytes_; }

 private:
  void* p_ = nullptr;
  size_t bytes_ = 0;
};

// Page-locked host memory that only grows (copies to and from it are asynchronous).
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  ~PinnedBuffer() { cudaFreeHost(p_); }
  PinnedBuffer(PinnedBuffer&& o) noexcept : p_(std::exchange(o.p_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  PinnedBuffer& operator=(PinnedBuffer&&) = delete;
  void reserve(size_t bytes) {
    if (bytes <= bytes_) return;
    cudaFreeHost(p_);
    p_ = nullptr;
    bytes_ = 0;
    check(cudaHostAlloc(&p_, bytes, cudaHostAllocDefault), "cudaHostAlloc");
    bytes_ = bytes;
  }
  template <class T = void>
  T* get() const {
    return static_cast<T*>(p_);
  }

 private:
  void* p_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace conveyor::cuda
