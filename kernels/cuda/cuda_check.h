// Checked CUDA runtime calls (STYLE 7): every runtime call and every kernel launch goes
// through one of these, and a failure becomes a kiln::Error that names the call, the
// file and line, and the runtime's error name and string:
//
//   KILN_CUDA_CHECK(cudaMemcpyAsync(dst, src, n, cudaMemcpyDefault, stream));
//   my_kernel<<<grid, block, 0, stream>>>(...);
//   KILN_CUDA_CHECK_LAUNCH();
//
// An error is never left pending: the sticky-free ones are cleared with
// cudaGetLastError() before throwing, so the next call does not report a stale failure.
// cuBLAS has its own checker beside its handle (cublas/cublas_handle.h).
#pragma once

#include <cuda_runtime_api.h>

namespace kiln::cuda::detail {

[[noreturn]] void throw_cuda_error(cudaError_t status, const char* call, const char* file, int line);

inline void check_cuda(cudaError_t status, const char* call, const char* file, int line) {
  if (status != cudaSuccess) [[unlikely]] throw_cuda_error(status, call, file, line);
}

}  // namespace kiln::cuda::detail

#define KILN_CUDA_CHECK(call) ::kiln::cuda::detail::check_cuda((call), #call, __FILE__, __LINE__)
// After a <<<...>>> launch: reports a bad launch configuration (and any earlier
// asynchronous error the runtime has noticed) at the launch site.
#define KILN_CUDA_CHECK_LAUNCH() \
  ::kiln::cuda::detail::check_cuda(cudaGetLastError(), "kernel launch", __FILE__, __LINE__)
