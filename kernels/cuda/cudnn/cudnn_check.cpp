// The error path of KILN_CUDNN_CHECK (cudnn_check.h).
#include "kernels/cuda/cudnn/cudnn_check.h"

#include "core/error.h"

namespace kiln::cuda::detail {

void throw_cudnn_error(cudnnStatus_t status, const char* call, const char* file, int line) {
  KILN_CHECK(false, "cuDNN error ", static_cast<int>(status), " (", cudnnGetErrorString(status), ") from ", call,
             " at ", file, ":", line);
  __builtin_unreachable();
}

}  // namespace kiln::cuda::detail
