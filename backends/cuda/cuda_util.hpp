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

// Memory that only grows: device memory (DeviceBuffer), or page-locked host
// memory that copies to and from the device can run asynchronously with
// (PinnedBuffer). reserve() frees the old memory, so the caller makes sure no
// queued work still uses it (the runner waits for its stream first).
template <bool Pinned>
class Buffer {
 public:
  Buffer() = default;
  ~Buffer() { release(); }
  Buffer(Buffer&& o) noexcept : p_(std::exchange(o.p_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  Buffer& operator=(Buffer&&) = delete;
  void reserve(size_t bytes) {
    if (bytes <= bytes_) return;
    release();
    if constexpr (Pinned)
      check(cudaHostAlloc(&p_, bytes, cudaHostAllocDefault), "cudaHostAlloc");
    else
      check(cudaMalloc(&p_, bytes), "cudaMalloc");
    bytes_ = bytes;
  }
  template <class T = void>
  T* get() const {
    return static_cast<T*>(p_);
  }
  size_t bytes() const { return bytes_; }

 private:
  void release() {
    if constexpr (Pinned)
      cudaFreeHost(p_);
    else
      cudaFree(p_);
    p_ = nullptr;
    bytes_ = 0;
  }
  void* p_ = nullptr;
  size_t bytes_ = 0;
};
using DeviceBuffer = Buffer<false>;
using PinnedBuffer = Buffer<true>;

}  // namespace conveyor::cuda

#include <memory>
#include <mutex>
#include <vector>

namespace conveyor::cuda {

// When device work ran, from CUDA events: the CUDA runner records each
// step's work on the compute stream, the swap engine each order on its copy
// stream (set_timeline in backends/cuda/cuda_runner.hpp). For benchmarks
// (bench/swap_overlap_bench.cpp); nothing records without one.
class Timeline {
 public:
  enum class Lane : uint8_t { compute, to_host, to_device };
  struct Span {
    Lane lane;
    double start_ms, end_ms;  // since the timeline was made
  };

  Timeline() {
    check(cudaEventCreate(&origin_), "cudaEventCreate");
    check(cudaEventRecord(origin_, nullptr), "cudaEventRecord");
  }
  ~Timeline() {
    for (const Recorded& r : recorded_) {
      cudaEventDestroy(r.start);
      cudaEventDestroy(r.end);
    }
    cudaEventDestroy(origin_);
  }
  Timeline(const Timeline&) = delete;
  Timeline& operator=(const Timeline&) = delete;

  // Takes two events recorded on one stream around some work; they are destroyed with the timeline.
  void add(Lane lane, cudaEvent_t start, cudaEvent_t end) {
    std::lock_guard lock(mutex_);
    recorded_.push_back(Recorded{lane, start, end});
  }
  // Waits for every recorded event and returns the spans, in recording order.
  std::vector<Span> spans() {
    std::lock_guard lock(mutex_);
    std::vector<Span> out;
    for (const Recorded& r : recorded_) {
      float a = 0, b = 0;
      check(cudaEventSynchronize(r.end), "cudaEventSynchronize");
      check(cudaEventElapsedTime(&a, origin_, r.start), "cudaEventElapsedTime");
      check(cudaEventElapsedTime(&b, origin_, r.end), "cudaEventElapsedTime");
      out.push_back(Span{r.lane, a, b});
    }
    return out;
  }

 private:
  struct Recorded {
    Lane lane;
    cudaEvent_t start, end;
  };
  cudaEvent_t origin_ = nullptr;
  std::mutex mutex_;
  std::vector<Recorded> recorded_;
};

}  // namespace conveyor::cuda
