// CUDA entry points of a build with CUDA (actors/cuda_backend.hpp).
#include "actors/cuda_backend.hpp"

#include <cuda_runtime_api.h>

#include <string>

#include "actors/backend.hpp"

namespace conveyor {

bool cuda_compiled_in() { return true; }

Status check_cuda_device(int32_t index) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  const std::string flag = "--device cuda:" + std::to_string(index);
  if (e != cudaSuccess)
    return make_error(Errc::unsupported, flag + ": no usable CUDA device (cudaGetDeviceCount: " +
                                             cudaGetErrorString(e) + ")");
  if (count == 0) return make_error(Errc::unsupported, flag + ": no CUDA device on this machine");
  if (index >= count)
    return make_error(Errc::invalid_argument, flag + ": this machine has " + std::to_string(count) +
                                                  " CUDA device(s), 0 to " + std::to_string(count - 1));
  return Status::ok();
}

Expected<Backend> make_cuda_backend(const EngineConfig& config, LoadedModel) {
  if (auto d = parse_device(config.device); !d || d->kind != DeviceKind::cuda)
    return make_error(Errc::invalid_argument, "make_cuda_backend: device '" + config.device + "' is not CUDA");
  if (Status s = check_cuda_device(parse_device(config.device)->index); !s) return s.error();
  return make_error(Errc::unsupported,
                    "--device " + config.device +
                        ": the CUDA runner is not built yet (kernels/cuda is; docs/DESIGN.md, issue 13); "
                        "use --device cpu");
}

}  // namespace conveyor
