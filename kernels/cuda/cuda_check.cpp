// The error path of KILN_CUDA_CHECK (cuda_check.h).
#include "kernels/cuda/cuda_check.h"

#include "core/error.h"

namespace kiln::cuda::detail {

void throw_cuda_error(cudaError_t status, const char* call, const char* file, int line) {
  cudaGetLastError();  // clear a non-sticky error so it is not reported again by the next call
  KILN_CHECK(false, "CUDA error ", cudaGetErrorName(status), " (", cudaGetErrorString(status), ") from ", call,
             " at ", file, ":", line);
  __builtin_unreachable();
}

}  // namespace kiln::cuda::detail
