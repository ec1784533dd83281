// Device discovery through the CUDA runtime API (cudaGetDeviceCount), errors turned into
// a reason string instead of a crash.
#include "kernels/cuda/runtime.h"

#include <cuda_runtime_api.h>

namespace kiln::cuda {

int device_count(std::string* reason) {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    if (reason) *reason = std::string("cudaGetDeviceCount failed: ") + cudaGetErrorString(status);
    cudaGetLastError();  // clear the sticky error state
    return 0;
  }
  if (count == 0 && reason) *reason = "no CUDA device found";
  return count;
}

}  // namespace kiln::cuda
