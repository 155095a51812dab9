// The CUDA backend's entry points (backends/backend.hpp calls them). Two files
// define them: cuda_backend.cpp in builds with CUDA (CONVEYOR_CUDA), and
// cuda_backend_none.cpp, which says CUDA is not compiled in, in the others.
#pragma once

#include <cstdint>

#include "base/status.hpp"

namespace conveyor {

// Ok when CUDA device `index` exists and the driver can run this build's
// code; else an error naming what is missing.
Status check_cuda_device(int32_t index);

// Whether this build has CUDA support compiled in.
bool cuda_compiled_in();

}  // namespace conveyor
