#include "kernels/cpu/omp_threads.hpp"

#include <omp.h>

namespace conveyor::kernels {

void release_openmp_threads() {
  // OpenMP 5.0: frees the calling thread's thread pool (libgomp), so that
  // its threads no longer count against the cores.
  (void)omp_pause_resource_all(omp_pause_hard);
}

}  // namespace conveyor::kernels
