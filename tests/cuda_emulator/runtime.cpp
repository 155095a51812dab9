// The CUDA runtime and cuBLAS functions the CUDA backend calls, emulated
// (emulator.hpp). Defined against the toolkit's declarations, so the backend
// compiles unchanged; linked instead of cudart and cuBLAS.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kernels/cuda/hd.hpp"
#include "tests/cuda_emulator/emulator.hpp"

using Clock = std::chrono::steady_clock;

struct CUstream_st {
  CUstream_st() : worker([this] { run(); }) {}
  ~CUstream_st() {
    {
      std::lock_guard lock(m);
      stop = true;
    }
    cv.notify_all();
    worker.join();
  }
  void push(std::function<void()> work) {
    {
      std::lock_guard lock(m);
      queue.push_back(std::move(work));
      ++pending;
    }
    cv.notify_all();
  }
  void wait_idle() {
    std::unique_lock lock(m);
    cv.wait(lock, [&] { return pending == 0; });
  }

 private:
  void run() {
    std::unique_lock lock(m);
    for (;;) {
      cv.wait(lock, [&] { return stop || !queue.empty(); });
      if (queue.empty()) return;
      std::function<void()> work = std::move(queue.front());
      queue.pop_front();
      lock.unlock();
      work();
      lock.lock();
      --pending;
      cv.notify_all();
    }
  }
  std::mutex m;
  std::condition_variable cv;
  std::deque<std::function<void()>> queue;
  size_t pending = 0;
  bool stop = false;
  std::thread worker;  // last: started once the rest is built
};

struct CUevent_st {
  std::mutex m;
  std::condition_variable cv;
  uint64_t recorded = 0, reached = 0;  // records queued, and reached by their stream
  Clock::time_point at;
};

struct cublasContext {
  cudaStream_t stream = nullptr;
};

namespace {

constexpr size_t kTotalMemory = size_t(8) << 30;  // what cudaMemGetInfo reports as the device's
std::atomic<size_t> g_allocated{0};
// Device memory: each allocation mapped on its own, between two pages no one
// may touch, and ending at the second; so a kernel or a copy that reads or
// writes past its end (or before its mapping) faults, much as
// compute-sanitizer's memcheck reports it. Sizes are rounded up to 256 bytes,
// a device allocation's alignment: an overrun within that goes unseen.
struct Mapping {
  char* base;
  size_t mapped, requested;
};
std::mutex g_sizes_mutex;
std::unordered_map<void*, Mapping> g_sizes;

void* map_device(size_t bytes, Mapping& m) {
  const size_t page = size_t(sysconf(_SC_PAGESIZE));
  const size_t rounded = std::max<size_t>((bytes + 255) / 256 * 256, 256);
  const size_t mapped = (rounded + page - 1) / page * page + 2 * page;
  void* base = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (base == MAP_FAILED) return nullptr;
  m = {static_cast<char*>(base), mapped, bytes};
  mprotect(m.base, page, PROT_NONE);
  mprotect(m.base + mapped - page, page, PROT_NONE);
  return m.base + mapped - page - rounded;
}

CUstream_st& default_stream() {
  static CUstream_st s;
  return s;
}

CUstream_st& stream_of(cudaStream_t s) {
  // cudaStreamLegacy and cudaStreamPerThread are small constants.
  return reinterpret_cast<uintptr_t>(s) <= 2 ? default_stream() : *s;
}

void* allocate(size_t bytes) { return std::aligned_alloc(256, std::max<size_t>((bytes + 255) / 256 * 256, 256)); }

}  // namespace

static thread_local cudaError_t t_last_error = cudaSuccess;

namespace conveyor::cuda_emulator {
void enqueue(cudaStream_t stream, std::function<void()> work) { stream_of(stream).push(std::move(work)); }
void set_last_error(cudaError_t error) { t_last_error = error; }
}  // namespace conveyor::cuda_emulator

extern "C" {

cudaError_t cudaGetDeviceCount(int* count) {
  *count = 1;
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) { return device == 0 ? cudaSuccess : cudaErrorInvalidDevice; }

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (device != 0) return cudaErrorInvalidDevice;
  *prop = cudaDeviceProp{};
  std::strncpy(prop->name, "conveyor's CUDA emulator", sizeof prop->name - 1);
  prop->totalGlobalMem = kTotalMemory;
  prop->major = 9;
  return cudaSuccess;
}

const char* cudaGetErrorString(cudaError_t error) {
  switch (error) {
    case cudaSuccess: return "no error";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    default: return "an emulated CUDA error";
  }
}

cudaError_t cudaGetLastError(void) { return std::exchange(t_last_error, cudaSuccess); }

cudaError_t cudaMemGetInfo(size_t* free, size_t* total) {
  *total = kTotalMemory;
  *free = kTotalMemory - std::min(kTotalMemory, g_allocated.load());
  return cudaSuccess;
}

cudaError_t cudaMalloc(void** p, size_t bytes) {
  if (g_allocated.load() + bytes > kTotalMemory) return cudaErrorMemoryAllocation;
  Mapping m;
  *p = map_device(bytes, m);
  if (*p == nullptr) return cudaErrorMemoryAllocation;
  g_allocated += bytes;
  std::lock_guard lock(g_sizes_mutex);
  g_sizes[*p] = m;
  return cudaSuccess;
}

cudaError_t cudaFree(void* p) {
  if (p == nullptr) return cudaSuccess;
  Mapping m;
  {
    std::lock_guard lock(g_sizes_mutex);
    auto it = g_sizes.find(p);
    if (it == g_sizes.end()) return cudaErrorInvalidValue;
    g_allocated -= it->second.requested;
    m = it->second;
    g_sizes.erase(it);
  }
  munmap(m.base, m.mapped);
  return cudaSuccess;
}

cudaError_t cudaHostAlloc(void** p, size_t bytes, unsigned int) {
  *p = allocate(bytes);
  return *p != nullptr ? cudaSuccess : cudaErrorMemoryAllocation;
}

cudaError_t cudaFreeHost(void* p) {
  std::free(p);
  return cudaSuccess;
}

cudaError_t cudaMemset(void* p, int value, size_t bytes) {
  default_stream().wait_idle();
  std::memset(p, value, bytes);
  return cudaSuccess;
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind) {
  default_stream().wait_idle();
  std::memcpy(dst, src, bytes);
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind, cudaStream_t stream) {
  stream_of(stream).push([=] { std::memcpy(dst, src, bytes); });
  return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int) {
  *stream = new CUstream_st;
  return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  if (reinterpret_cast<uintptr_t>(stream) > 2) {
    stream->wait_idle();
    delete stream;
  }
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  stream_of(stream).wait_idle();
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void) {
  default_stream().wait_idle();
  return cudaSuccess;
}

// Runs when the stream reaches it; the emulated device has no errors to pass.
cudaError_t cudaStreamAddCallback(cudaStream_t stream, cudaStreamCallback_t callback, void* data, unsigned int) {
  stream_of(stream).push([stream, callback, data] { callback(stream, cudaSuccess, data); });
  return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t* event) {
  *event = new CUevent_st;
  return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int) { return cudaEventCreate(event); }

// CUDA releases an event still to be reached once it is; here the caller
// waits for that.
cudaError_t cudaEventDestroy(cudaEvent_t event) {
  {
    std::unique_lock lock(event->m);
    event->cv.wait(lock, [&] { return event->reached >= event->recorded; });
  }
  delete event;
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  uint64_t n;
  {
    std::lock_guard lock(event->m);
    n = ++event->recorded;
  }
  stream_of(stream).push([event, n] {
    std::lock_guard lock(event->m);  // held while notifying: a waiter may delete the event next
    event->reached = std::max(event->reached, n);
    event->at = Clock::now();
    event->cv.notify_all();
  });
  return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t event) {
  std::lock_guard lock(event->m);
  return event->reached >= event->recorded ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  std::unique_lock lock(event->m);
  const uint64_t n = event->recorded;
  event->cv.wait(lock, [&] { return event->reached >= n; });
  return cudaSuccess;
}

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  if (cudaEventQuery(start) != cudaSuccess || cudaEventQuery(end) != cudaSuccess) return cudaErrorNotReady;
  std::scoped_lock lock(start->m, end->m);
  *ms = std::chrono::duration<float, std::milli>(end->at - start->at).count();
  return cudaSuccess;
}

cublasStatus_t cublasCreate_v2(cublasHandle_t* handle) {
  *handle = new cublasContext;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy_v2(cublasHandle_t handle) {
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t stream) {
  handle->stream = stream;
  return CUBLAS_STATUS_SUCCESS;
}

// Only what the CUDA runner asks for: C (float32, column-major) = alpha ·
// Aᵀ · B + beta · C, A and B bf16, accumulated in float32.
cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                            int k, const void* alpha, const void* A, cudaDataType Atype, int lda, const void* B,
                            cudaDataType Btype, int ldb, const void* beta, void* C, cudaDataType Ctype, int ldc,
                            cublasComputeType_t compute, cublasGemmAlgo_t) {
  if (transa != CUBLAS_OP_T || transb != CUBLAS_OP_N || Atype != CUDA_R_16BF || Btype != CUDA_R_16BF ||
      Ctype != CUDA_R_32F || compute != CUBLAS_COMPUTE_32F)
    return CUBLAS_STATUS_NOT_SUPPORTED;
  const float a = *static_cast<const float*>(alpha), b = *static_cast<const float*>(beta);
  const auto* pa = static_cast<const uint16_t*>(A);
  const auto* pb = static_cast<const uint16_t*>(B);
  auto* pc = static_cast<float*>(C);
  stream_of(handle->stream).push([=] {
    using conveyor::kernels::cuda::bf16_to_f32;
    std::vector<float> x(size_t(n) * size_t(k));  // B's columns, widened once
    for (int j = 0; j < n; ++j)
      for (int p = 0; p < k; ++p) x[size_t(j) * k + p] = bf16_to_f32(pb[j * int64_t(ldb) + p]);
#pragma omp parallel
    {
      std::vector<float> w(static_cast<size_t>(k));
#pragma omp for schedule(static)
      for (int i = 0; i < m; ++i) {
        for (int p = 0; p < k; ++p) w[size_t(p)] = bf16_to_f32(pa[i * int64_t(lda) + p]);
        for (int j = 0; j < n; ++j) {
          const float* xj = x.data() + size_t(j) * k;
          float acc = 0.0f;
#pragma omp simd reduction(+ : acc)
          for (int p = 0; p < k; ++p) acc += w[size_t(p)] * xj[p];
          float& c = pc[i + j * int64_t(ldc)];
          c = b == 0.0f ? a * acc : a * acc + b * c;
        }
      }
    }
  });
  return CUBLAS_STATUS_SUCCESS;
}

}  // extern "C"
