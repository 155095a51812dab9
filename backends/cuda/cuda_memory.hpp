// KV pool memory on a CUDA machine (model/kv_cache.hpp's KvAllocator):
// device memory for the pool the kernels read, and pinned host memory for
// swap space, so that copies between the two can run asynchronously on a
// stream of their own. Built only with CUDA (CONVEYOR_CUDA). The CUDA
// backend (backends/cuda/cuda_backend.cpp) takes its KV pool from the first and its
// swap space from the second.
#pragma once

#include <cstdint>
#include <memory>

#include "model/kv_cache.hpp"

namespace conveyor {

// cudaMalloc on device `device`, zeroed with cudaMemset and waited for (it
// runs on the default stream, which the non-blocking streams that use the
// pool do not wait for); null where it fails.
std::shared_ptr<KvAllocator> cuda_device_allocator(int32_t device);

// cudaHostAlloc (portable, page-locked; zeroed); null where it fails.
std::shared_ptr<KvAllocator> cuda_pinned_allocator();

}  // namespace conveyor
