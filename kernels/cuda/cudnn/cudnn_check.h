// Checked cuDNN calls (STYLE 7), as cuda_check.h has them for the runtime:
//
//   KILN_CUDNN_CHECK(cudnnConvolutionForward(handle, ...));
//
// A status other than CUDNN_STATUS_SUCCESS becomes a kiln::Error naming the call, the
// file and line, and cudnnGetErrorString's description.
#pragma once

#include <cudnn.h>

namespace kiln::cuda::detail {

[[noreturn]] void throw_cudnn_error(cudnnStatus_t status, const char* call, const char* file, int line);

inline void check_cudnn(cudnnStatus_t status, const char* call, const char* file, int line) {
  if (status != CUDNN_STATUS_SUCCESS) [[unlikely]] throw_cudnn_error(status, call, file, line);
}

}  // namespace kiln::cuda::detail

#define KILN_CUDNN_CHECK(call) ::kiln::cuda::detail::check_cudnn((call), #call, __FILE__, __LINE__)
