// cuBLAS handles and checked cuBLAS calls.
//
// A cublasHandle_t holds cuBLAS's per-context state and is not thread-safe, so Kiln keeps
// one per (device, host thread), created lazily on first use and destroyed when the
// thread exits (RAII). Before each use the handle is bound to the calling thread's current
// stream (cublasSetStream) and given a workspace from the caching allocator
// (cublasSetWorkspace), so cuBLAS never allocates device memory behind the allocator's
// back. cublasSetStream resets the workspace to cuBLAS's own pool, hence both calls,
// in that order, every time.
//
// Note [cuBLAS workspace per stream]: cuBLAS kernels use the workspace while they run.
// Two streams used by one thread could run products at the same time, so each (handle,
// stream) pair has its own workspace, kept until the thread exits. The size follows
// cuBLAS's guidance: 32 MiB on Hopper (compute capability 9.x and later), 4 MiB before.
//
//   KILN_CUBLAS_CHECK(cublasGemmEx(handle, ...));   // kiln::Error with file, line, call,
//                                                    // status name and description
#pragma once

#include <cublas_v2.h>

#include <cstddef>

#include "kernels/cuda/stream.h"

namespace kiln::cuda {

namespace detail {
[[noreturn]] void throw_cublas_error(cublasStatus_t status, const char* call, const char* file, int line);

inline void check_cublas(cublasStatus_t status, const char* call, const char* file, int line) {
  if (status != CUBLAS_STATUS_SUCCESS) [[unlikely]] throw_cublas_error(status, call, file, line);
}
}  // namespace detail

// Workspace bytes per (handle, stream) for a device of compute capability `major`.x.
constexpr size_t cublas_workspace_bytes(int major) { return major >= 9 ? size_t{32} << 20 : size_t{4} << 20; }

// The calling thread's cuBLAS handle for `stream.device()`, bound to `stream` and to its
// workspace. The caller must have made stream.device() current (a DeviceGuard). Valid
// until the thread exits; do not share it with another thread.
cublasHandle_t cublas_handle(Stream stream);

}  // namespace kiln::cuda

#define KILN_CUBLAS_CHECK(call) ::kiln::cuda::detail::check_cublas((call), #call, __FILE__, __LINE__)
