// For tests that need a CUDA device (label gpu): SKIP_WITHOUT_DEVICE() skips
// the test with cudaGetDeviceCount's reason where there is none.
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <string>

namespace conveyor::testing {

// Empty when a device is usable, else why not.
inline std::string no_device_reason() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) return std::string("no CUDA device: cudaGetDeviceCount says ") + cudaGetErrorString(e);
  if (n == 0) return "no CUDA device on this machine";
  return "";
}

}  // namespace conveyor::testing

#define SKIP_WITHOUT_DEVICE()                                                                 \
  do {                                                                                        \
    if (const std::string why = ::conveyor::testing::no_device_reason(); !why.empty()) \
      GTEST_SKIP() << why;                                                                    \
  } while (0)
