# The BLAS behind kernels::matmul_blas: OpenBLAS, built for OpenMP so that its
# threads and conveyor's own OpenMP kernels share one thread pool instead of
# fighting over the cores.
#
# The forward pass itself does not call BLAS: its products run through
# conveyor's packed-panel kernel (kernels/cpu/matmul.hpp), which at decode
# batch sizes is 1.4-3x faster than every BLAS installed here and matches them
# on prefill-sized products. kernels/cpu/README.md has the measurements
# (bench/blas_bench.cpp) and why OpenBLAS stays the BLAS: best of the four at
# n >= 32 and on prefill shapes, an OpenMP build, and no extra package.
#
# Debian installs each threading flavour in its own folder, so we link the
# OpenMP one by path rather than through update-alternatives. Its soname,
# libopenblas.so.0, is also the alternatives name, which usually points at the
# pthread flavour: the binary must find the OpenMP one through its RUNPATH.
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
# Build trees get the folder in their RUNPATH from CMake; keep it on install too.
set(CMAKE_INSTALL_RPATH_USE_LINK_PATH ON)
message(STATUS "BLAS: ${CONVEYOR_BLAS_LIBRARY}")
