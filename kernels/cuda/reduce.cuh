// Warp and block reductions shared by the CUDA kernels (device code only).
#pragma once

namespace conveyor::kernels::cuda {

__device__ __forceinline__ float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// The sum of `v` over a block of Threads threads (a multiple of 32), on every
// thread. `partial` is shared memory of Threads / 32 floats.
template <int Threads>
__device__ __forceinline__ float block_sum(float v, float* partial) {
  v = warp_sum(v);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  float total = 0.0f;
  for (int w = 0; w < Threads / 32; ++w) total += partial[w];
  __syncthreads();  // `partial` may be reused at once
  return total;
}

}  // namespace conveyor::kernels::cuda
