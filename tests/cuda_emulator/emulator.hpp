// A CUDA device emulated on the host, for the CUDA backend and its kernels on
// machines without a GPU: the runtime and cuBLAS functions the backend calls
// (runtime.cpp), against the toolkit's own headers, and kernels/cuda's
// kernels (simt.hpp: their own .cu sources, each block's threads as fibers;
// in the sanitizer builds their CPU twins instead, kernels.cpp).
//
// Each stream is a thread that runs its queued work in order, so copies and
// kernels run later than the call that queued them and events fire when the
// stream reaches them, as on a device: a host buffer overwritten before its
// queued copy ran, a result read before its event fired, or a missing wait
// on another stream shows as wrong tokens. "Device" memory is host memory,
// each allocation ending at a guard page; products are bf16 by bf16 in
// float32. What it cannot show is the device's
// speed, or a race between blocks. A race between a block's threads shows
// in the TSan build's race check (simt.cpp), and in the release build only
// where the fibers' order exposes it (simt.hpp).
#pragma once

#include <cuda_runtime_api.h>

#include <functional>

namespace conveyor::cuda_emulator {

// Queues `work` on `stream` (null: the default stream).
void enqueue(cudaStream_t stream, std::function<void()> work);

// What the calling thread's next cudaGetLastError returns (a failed launch).
void set_last_error(cudaError_t error);

}  // namespace conveyor::cuda_emulator
