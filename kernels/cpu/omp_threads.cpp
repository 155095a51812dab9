#include "kernels/cpu/omp_threads.hpp"

#include <omp.h>

namespace conveyor::kernels {

void release_openmp_threads() {
#if !defined(__clang__)
  // GCC builds link libgomp, whose omp_pause_resource_all (OpenMP 5.0)
  // frees the calling thread's pool only: its threads stop counting
  // against the cores. Clang builds link LLVM's libomp, whose pause stops
  // the whole runtime, other threads' teams included (it crashed the
  // executor's team mid-step under the sanitizers); the spin rule this
  // works around is libgomp's, so there it does nothing.
  (void)omp_pause_resource_all(omp_pause_hard);
#endif
}

}  // namespace conveyor::kernels
