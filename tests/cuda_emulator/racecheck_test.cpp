// The race check itself (simt.cpp, the TSan build): kernels written for it,
// each in a child process, must end in a ThreadSanitizer report exactly where
// a device leaves two threads of a block unordered. So the check cannot
// quietly stop seeing races (a synchronising fiber switch, a barrier that
// orders too much) while the kernel tests keep passing.
#include "tests/cuda_emulator/simt.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <vector>

namespace {

using conveyor::cuda_emulator::simt::launch_named;

constexpr int kThreads = 64;

// Thread 0 writes, the others read: with a barrier between, or not.
__global__ void publish(float* out, bool barrier) {
  __shared__ float value;
  if (threadIdx.x == 0) value = float(blockIdx.x);
  if (barrier) __syncthreads();
  out[blockIdx.x * blockDim.x + threadIdx.x] = value;
}

// Both barriers present, then a write after the second that another thread
// reads after it too: the race is past the last barrier.
__global__ void race_after_barriers(float* out) {
  __shared__ float value[kThreads];
  value[threadIdx.x] = 1.0f;
  __syncthreads();
  value[threadIdx.x] += 1.0f;
  __syncthreads();
  if (threadIdx.x == 1) value[0] = 5.0f;
  out[threadIdx.x] = value[0];
}

// Thread 0 writes while the others read, between two barriers. Thread 0
// runs first and reaches the second barrier before the others leave the
// first: what they acquire leaving the first must not include what it
// released arriving at the second.
__global__ void race_between_barriers(float* out) {
  __shared__ float value;
  if (threadIdx.x == 0) value = 1.0f;
  __syncthreads();
  if (threadIdx.x == 0) value = 5.0f;
  const float got = value;
  __syncthreads();
  out[threadIdx.x] = got;
}

// A shuffle exchanges values, it orders no memory (one warp: nothing else
// between the write and the reads).
__global__ void order_by_shuffle(float* out) {
  __shared__ float value;
  if (threadIdx.x == 0) value = 3.0f;
  const float got = __shfl_xor_sync(0xffffffffu, 1.0f, 1);
  out[threadIdx.x] = value + got;
}

// Two threads write the same device memory with no barrier between.
__global__ void same_output(float* out) { out[threadIdx.x / 2] = float(threadIdx.x); }

float* device_floats(int n) {
  float* p = nullptr;
  if (cudaMalloc(reinterpret_cast<void**>(&p), size_t(n) * sizeof(float)) != cudaSuccess) std::abort();
  return p;
}

void run_publish(bool barrier) {
  float* out = device_floats(4 * kThreads);
  launch_named(publish, "publish", 4, kThreads)(out, barrier);
  if (cudaDeviceSynchronize() != cudaSuccess) std::abort();
  std::vector<float> host(4 * kThreads);
  cudaMemcpy(host.data(), out, host.size() * sizeof(float), cudaMemcpyDeviceToHost);
  for (int i = 0; i < 4 * kThreads; ++i)
    if (host[size_t(i)] != float(i / kThreads)) std::abort();
  cudaFree(out);
}

template <class Kernel>
void run(Kernel kernel, const char* name, int threads = kThreads) {
  float* out = device_floats(threads);
  launch_named(kernel, name, 1, threads)(out);
  if (cudaDeviceSynchronize() != cudaSuccess) std::abort();
  cudaFree(out);
}

class Racecheck : public testing::Test {
 protected:
  // The child re-runs this program (threads already exist; fork alone is not safe).
  void SetUp() override { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
};

TEST_F(Racecheck, BarrierOrdersAWriteBeforeTheReads) { run_publish(true); }

TEST_F(Racecheck, ReadsWithoutTheBarrierAreARace) {
  EXPECT_DEATH(run_publish(false), "data race.*kernel publish, block \\(0, 0, 0\\)");
}

TEST_F(Racecheck, RaceAfterTheLastBarrierIsReported) {
  EXPECT_DEATH(run(race_after_barriers, "race_after_barriers"), "data race.*race_after_barriers");
}

TEST_F(Racecheck, RaceBetweenTwoBarriersIsReported) {
  EXPECT_DEATH(run(race_between_barriers, "race_between_barriers"), "data race.*race_between_barriers");
}

TEST_F(Racecheck, AShuffleOrdersNoMemory) {
  EXPECT_DEATH(run(order_by_shuffle, "order_by_shuffle", 32), "data race.*order_by_shuffle");
}

TEST_F(Racecheck, TwoThreadsWritingOneAddressAreARace) {
  EXPECT_DEATH(run(same_output, "same_output"), "data race.*same_output");
}

}  // namespace
