// y = x·Wᵀ through oneDNN's matmul primitive, used the way inference engines
// use it: W [m, k] (row-major, as in model/weights.hpp) is reordered ONCE, at
// construction, into the blocked layout the primitive prefers (weights format
// `any`), and every call only wraps the caller's x and y pointers.
//
// oneDNN 2.6 picks its brgemm implementation (brg:avx512_core here) only for
// a fixed M (the batch n): with M = DNNL_RUNTIME_DIM_VAL it falls back to
// gemm:jit on plain weights, which re-packs W on every call like any sgemm.
// So this class keeps a small cache of primitives, one per
// (n, ldx, ldy, accumulate); the preferred weights layout does not depend on n
// (BA16a64b: [m/64][k/16][16][64], m padded to a multiple of 64), so all of
// them share the one reordered copy of W. The first call with a new key
// creates its primitive (JIT, allocates); later calls allocate nothing on our
// side (oneDNN builds a small argument map inside execute).
//
// Threads: Debian's oneDNN is built with OpenMP and runs on the calling
// thread's team size (omp_set_num_threads), sharing libgomp's pool with the
// other kernels. kernels/cpu/README.md has the measurements against
// matmul_packed.
#pragma once

#include <cstdint>
#include <memory>

namespace conveyor::kernels {

class DnnlMatmul {
 public:
  DnnlMatmul();
  // Reorders W [m, k] into the primitive's layout; W is not referenced after.
  DnnlMatmul(const float* w, int32_t m, int32_t k);
  ~DnnlMatmul();
  DnnlMatmul(DnnlMatmul&&) noexcept;
  DnnlMatmul& operator=(DnnlMatmul&&) noexcept;

  int32_t rows() const;  // m
  int32_t cols() const;  // k
  // Bytes of the reordered W (m padded to the layout's blocks).
  size_t packed_bytes() const;
  // The oneDNN implementation chosen for batch n (e.g. "brg:avx512_core").
  const char* implementation(int32_t n);

  // y = x·Wᵀ (accumulate: y += x·Wᵀ, through a sum post-op).
  void run(const float* x,  // [n, ldx], first k columns used
           int64_t ldx, int32_t n,
           float* y,  // [n, ldy], first m columns written
           int64_t ldy, bool accumulate = false);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace conveyor::kernels
