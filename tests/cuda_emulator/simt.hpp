// kernels/cuda's .cu sources, run on the host: what a kernel body needs from
// CUDA's device side (threadIdx and the rest, __syncthreads, full-warp XOR
// shuffles, atomicAdd, __shared__), for the host compiler. simt_source.cmake
// rewrites each launch `k<<<grid, block, shared, stream>>>(args)` as
// `launch_named(k, "k", grid, block, shared, stream)(args)`, and the build
// includes this header first, so the kernels compile from their own source.
//
// A launch is queued on its stream (emulator.hpp). The grid's blocks run one
// after another; a block's threads are fibers on the stream's thread, each run
// until it waits at a barrier: __syncthreads for the block, a shuffle for its
// warp. So __shared__ (static thread_local here) is one object per block
// (which, unlike a device's, starts with the last block's values), and
// a barrier some threads never reach, or a shuffle one lane of the warp never
// makes, stops the process with the kernel and the block named. Between
// barriers each thread runs until its next one, in index order in one block
// and in reverse in the next: a missing barrier shows where a thread reads
// what another has yet to write (or has already overwritten) in that order.
// Device memory ends at a guard page (runtime.cpp): a read or write past an
// allocation stops the process with the kernel, block and thread named.
// Built with ThreadSanitizer, the same run is a race check (simt.cpp).
#pragma once

#include <cuda_runtime_api.h>
#include <math.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <functional>
#include <tuple>
#include <type_traits>

#undef __global__
#undef __device__
#undef __host__
#undef __shared__
#undef __forceinline__
#undef __launch_bounds__
#define __global__
#define __device__
#define __host__
#define __shared__ static thread_local
#define __forceinline__ inline
#define __launch_bounds__(...)

namespace conveyor::cuda_emulator::simt {

struct Config {
  dim3 grid, block;
  size_t shared = 0;
  cudaStream_t stream = nullptr;
};

// Checks `config` as a launch does (the error goes to cudaGetLastError) and
// queues the grid; `name` names the kernel in a fault's message.
void launch_grid(const Config& config, const char* name, std::function<void()> body);

// The calling thread's position; set by the fiber scheduler.
extern thread_local uint3 thread_index, block_index;
extern thread_local dim3 block_size, grid_size;

void sync_block();
// Stops the process: the kernel does what this emulation does not.
[[noreturn]] void unsupported(const char* what);
// Every lane of the caller's warp passes `value`; returns that of the lane
// whose index is the caller's XOR `lane_mask` (the caller's own where the
// warp has no such lane).
uint64_t shuffle_xor(uint64_t value, unsigned lane_mask);

template <class... P>
struct Launch {
  void (*kernel)(P...);
  const char* name;
  Config config;

  // The arguments are converted to the kernel's parameters and copied, as a
  // launch copies them.
  template <class... A>
  void operator()(A&&... args) const {
    std::tuple<std::decay_t<P>...> copied(std::forward<A>(args)...);
    launch_grid(config, name, [k = kernel, copied] { std::apply(k, copied); });
  }
};

template <class... P>
Launch<P...> launch_named(void (*kernel)(P...), const char* name, dim3 grid, dim3 block, size_t shared = 0,
                          cudaStream_t stream = nullptr) {
  return {kernel, name, {grid, block, shared, stream}};
}

}  // namespace conveyor::cuda_emulator::simt

#define threadIdx (::conveyor::cuda_emulator::simt::thread_index)
#define blockIdx (::conveyor::cuda_emulator::simt::block_index)
#define blockDim (::conveyor::cuda_emulator::simt::block_size)
#define gridDim (::conveyor::cuda_emulator::simt::grid_size)

inline void __syncthreads() { ::conveyor::cuda_emulator::simt::sync_block(); }

template <class T>
T __shfl_xor_sync(unsigned mask, T value, int lane_mask, int width = 32) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable_v<T>);
  if (mask != 0xffffffffu || width != 32) ::conveyor::cuda_emulator::simt::unsupported("a shuffle of part of a warp");
  uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof value);
  bits = ::conveyor::cuda_emulator::simt::shuffle_xor(bits, unsigned(lane_mask));
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

// Relaxed, as on the device: an atomic orders nothing else.
template <class T>
T atomicAdd(T* address, T value) {
  return std::atomic_ref<T>(*address).fetch_add(value, std::memory_order_relaxed);
}

// CUDA's host-and-device min and max.
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline long long min(long long a, long long b) { return a < b ? a : b; }
inline long long max(long long a, long long b) { return a > b ? a : b; }
