// A CUDA device emulated on the host, for tests of the CUDA backend's host
// code (actors/cuda_*.cpp) on machines without a GPU: the runtime and cuBLAS
// functions that code calls (runtime.cpp) and kernels/cuda's launchers
// (kernels.cpp), against the toolkit's own headers.
//
// Each stream is a thread that runs its queued work in order, so copies and
// kernels run later than the call that queued them and events fire when the
// stream reaches them, as on a device: a host buffer overwritten before its
// queued copy ran, a result read before its event fired, or a missing wait
// on another stream shows as wrong tokens. "Device" memory is host memory.
// Kernels run their CPU twins (kernels/cpu) and the kernels' own
// sampling_math.hpp functions; products are bf16 by bf16 in float32. It
// checks the orchestration, not the .cu kernels: those need a GPU
// (tests/kernels/cuda/device_test.cpp).
#pragma once

#include <cuda_runtime_api.h>

#include <functional>

namespace conveyor::cuda_emulator {

// Queues `work` on `stream` (null: the default stream).
void enqueue(cudaStream_t stream, std::function<void()> work);

}  // namespace conveyor::cuda_emulator
