# The BLAS behind the CPU matrix products: OpenBLAS, built for OpenMP so that
# its threads and conveyor's own OpenMP kernels share one thread pool instead
# of fighting over the cores. See kernels/cpu/README.md for the measurements
# that chose it. Debian installs each threading flavour in its own folder, so
# we link the OpenMP one by path rather than through update-alternatives.
find_path(CONVEYOR_CBLAS_INCLUDE_DIR cblas.h
  PATHS /usr/include/x86_64-linux-gnu/openblas-openmp /usr/include/openblas-openmp
  NO_DEFAULT_PATH)
find_library(CONVEYOR_BLAS_LIBRARY NAMES openblas
  PATHS /usr/lib/x86_64-linux-gnu/openblas-openmp NO_DEFAULT_PATH)
if(NOT CONVEYOR_CBLAS_INCLUDE_DIR OR NOT CONVEYOR_BLAS_LIBRARY)
  message(FATAL_ERROR "OpenBLAS (OpenMP build) not found: apt-get install libopenblas-openmp-dev")
endif()
add_library(conveyor_blas INTERFACE)
target_include_directories(conveyor_blas INTERFACE ${CONVEYOR_CBLAS_INCLUDE_DIR})
target_link_libraries(conveyor_blas INTERFACE ${CONVEYOR_BLAS_LIBRARY} OpenMP::OpenMP_CXX)
message(STATUS "BLAS: ${CONVEYOR_BLAS_LIBRARY}")
