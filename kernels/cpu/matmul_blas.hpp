// y = x·Wᵀ through the BLAS chosen in cmake/ConveyorBlas.cmake (OpenBLAS's
// OpenMP build), on the unpacked W: the reference the packed product
// (matmul.hpp) is measured and tested against. A library of its own
// (conveyor_kernels_blas), linked by tests and benchmarks only: the forward
// pass never calls a BLAS, and loading OpenBLAS costs every process memory
// at start-up (under a small `ulimit -v` its buffers' allocation hung).
#pragma once

#include <cstdint>

namespace conveyor::kernels {

// sgemm, row-major, W transposed.
void matmul_blas(const float* x,  // [n, ldx]
                 int64_t ldx, int32_t n,
                 const float* w,  // [m, k]
                 int32_t m, int32_t k,
                 float* y,  // [n, ldy]
                 int64_t ldy, bool accumulate = false);

}  // namespace conveyor::kernels
