// CUDA entry points of a build without CUDA (backends/cuda/cuda_backend.hpp).
#include "backends/backend.hpp"
#include "backends/cuda/cuda_backend.hpp"

namespace conveyor {

namespace {
Error not_compiled_in() {
  return Error{Errc::unsupported,
               "--device cuda: this conveyor was built without CUDA support (configure where nvcc "
               "is found, or with -DCONVEYOR_CUDA=ON); use --device cpu"};
}
}  // namespace

bool cuda_compiled_in() { return false; }

Status check_cuda_device(int32_t) { return not_compiled_in(); }

Expected<Backend> make_cuda_backend(const EngineConfig&, LoadedModel) { return not_compiled_in(); }

}  // namespace conveyor
