// CudaSwapEngine (backends/cuda/cuda_runner.hpp): block copies between the device
// pool and pinned host memory on a stream per direction, reported by a
// waiter thread when each order's end event has fired.
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "backends/cuda/cuda_runner.hpp"
#include "backends/cuda/cuda_util.hpp"

namespace conveyor {

using cuda::check;

struct CudaSwapEngine::Impl {
  struct InFlight {
    cudaEvent_t start = nullptr, end = nullptr;
    Done done;
    std::shared_ptr<cuda::Timeline> timeline;  // takes the events when set
    cuda::Timeline::Lane lane = cuda::Timeline::Lane::to_host;
  };
  int32_t device = 0;
  std::shared_ptr<KvCache> device_pool, host_pool;
  cudaStream_t to_host = nullptr, to_device = nullptr;
  std::mutex mutex;
  std::condition_variable wake;
  std::deque<InFlight> queue;  // in submission order; each stream's orders complete in order
  bool stopping = false;
  std::shared_ptr<cuda::Timeline> timeline;  // null unless a benchmark asks
  std::thread waiter;

  void wait_loop() {
    cudaSetDevice(device);
    for (;;) {
      InFlight order;
      {
        std::unique_lock lock(mutex);
        wake.wait(lock, [&] { return stopping || !queue.empty(); });
        if (queue.empty()) return;
        order = std::move(queue.front());
        queue.pop_front();
      }
      // Orders of the two streams may finish out of order; waiting on them in
      // submission order only delays a report, never reports one early.
      cudaError_t e = cudaEventSynchronize(order.end);
      float ms = 0.0f;
      if (e == cudaSuccess) e = cudaEventElapsedTime(&ms, order.start, order.end);
      if (order.timeline) {
        order.timeline->add(order.lane, order.start, order.end);
      } else {
        cudaEventDestroy(order.start);
        cudaEventDestroy(order.end);
      }
      // A copy that failed on the stream is reported as failed, never as landed.
      if (e != cudaSuccess)
        order.done(make_error(Errc::internal, std::string("the copy stream: ") + cudaGetErrorString(e)));
      else
        order.done(double(ms) / 1e3);
    }
  }
};

CudaSwapEngine::CudaSwapEngine(int32_t device, std::shared_ptr<KvCache> device_pool,
                               std::shared_ptr<KvCache> host_pool)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.device = device;
  m.device_pool = std::move(device_pool);
  m.host_pool = std::move(host_pool);
  check(cudaSetDevice(device), "cudaSetDevice");
  check(cudaStreamCreateWithFlags(&m.to_host, cudaStreamNonBlocking), "cudaStreamCreate");
  check(cudaStreamCreateWithFlags(&m.to_device, cudaStreamNonBlocking), "cudaStreamCreate");
  m.waiter = std::thread([&m] { m.wait_loop(); });
}

CudaSwapEngine::~CudaSwapEngine() {
  Impl& m = *impl_;
  {
    std::lock_guard lock(m.mutex);
    m.stopping = true;
  }
  m.wake.notify_all();
  m.waiter.join();
  cudaStreamDestroy(m.to_host);
  cudaStreamDestroy(m.to_device);
}

void CudaSwapEngine::set_timeline(std::shared_ptr<cuda::Timeline> timeline) {
  std::lock_guard lock(impl_->mutex);
  impl_->timeline = std::move(timeline);
}

void CudaSwapEngine::submit(const SwapOrder& order, Done done) {
  Impl& m = *impl_;
  check(cudaSetDevice(m.device), "cudaSetDevice");
  const bool out = order.direction == SwapDirection::out;
  cudaStream_t stream = out ? m.to_host : m.to_device;
  const size_t bytes = m.device_pool->shape().block_bytes();
  Impl::InFlight f;
  f.done = std::move(done);
  {
    std::lock_guard lock(m.mutex);
    f.timeline = m.timeline;
  }
  f.lane = out ? cuda::Timeline::Lane::to_host : cuda::Timeline::Lane::to_device;
  check(cudaEventCreate(&f.start), "cudaEventCreate");
  // Blocking sync: the waiter thread sleeps until the copies are done
  // instead of spinning a core (the wake-up's cost: not measured, no GPU).
  check(cudaEventCreateWithFlags(&f.end, cudaEventBlockingSync), "cudaEventCreate");
  check(cudaEventRecord(f.start, stream), "cudaEventRecord");
  for (const auto& [from, to] : order.blocks) {
    if (out)
      check(cudaMemcpyAsync(m.host_pool->block_data(to), m.device_pool->block_data(from), bytes,
                            cudaMemcpyDeviceToHost, stream),
            "swap out");
    else
      check(cudaMemcpyAsync(m.device_pool->block_data(to), m.host_pool->block_data(from), bytes,
                            cudaMemcpyHostToDevice, stream),
            "swap in");
  }
  check(cudaEventRecord(f.end, stream), "cudaEventRecord");
  {
    std::lock_guard lock(m.mutex);
    m.queue.push_back(std::move(f));
  }
  m.wake.notify_one();
}

}  // namespace conveyor
