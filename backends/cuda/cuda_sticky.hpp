// Which CUDA runtime errors leave the context unusable ("sticky" errors):
// after one, every later CUDA call in the process returns the same error,
// and the CUDA documentation (driver_types.h, each code's comment) says that
// "to continue using CUDA, the process must be terminated and relaunched";
// cudaDeviceReset does not recover it. The CUDA runner checks this after an
// engine fault (CudaStepRunner::reset): a restart on a lost context would
// fail again at its first step, so the engine stops with the error instead.
//
// Plain codes (no CUDA include), so that a host test checks the list on any
// machine; backends/cuda/cuda_runner.cpp checks each code against
// cuda_runtime_api.h's names where CUDA is compiled in.
#pragma once

namespace conveyor {

inline bool sticky_cuda_error(int code) {
  switch (code) {
    case 226:  // cudaErrorContained: an exception the GPU's error containment caught
    case 700:  // cudaErrorIllegalAddress
    case 702:  // cudaErrorLaunchTimeout
    case 710:  // cudaErrorAssert: a device-side assert failed
    case 714:  // cudaErrorHardwareStackError
    case 715:  // cudaErrorIllegalInstruction
    case 716:  // cudaErrorMisalignedAddress
    case 717:  // cudaErrorInvalidAddressSpace
    case 718:  // cudaErrorInvalidPc
    case 719:  // cudaErrorLaunchFailure: an exception while running a kernel
    case 721:  // cudaErrorTensorMemoryLeak
    case 810:  // cudaErrorMpsClientTerminated
    case 911:  // cudaErrorExternalDevice
      return true;
    default:
      return false;
  }
}

}  // namespace conveyor
