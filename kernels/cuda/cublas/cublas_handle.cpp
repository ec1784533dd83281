// One cuBLAS handle per (device, thread), bound to the current stream with a workspace
// from the caching allocator at each use (cublas_handle.h).
#include "kernels/cuda/cublas/cublas_handle.h"

#include <vector>

#include "core/error.h"
#include "kernels/cuda/caching_allocator.h"
#include "kernels/cuda/runtime.h"
#include "kernels/cuda/thread_local_per_device.h"

namespace kiln::cuda {

namespace detail {

void throw_cublas_error(cublasStatus_t status, const char* call, const char* file, int line) {
  KILN_CHECK(false, "cuBLAS error ", cublasGetStatusName(status), " (", cublasGetStatusString(status), ") from ",
             call, " at ", file, ":", line);
  __builtin_unreachable();
}

}  // namespace detail

namespace {

// A cuBLAS handle of one device, owned by one thread, with its workspaces (Note [cuBLAS
// workspace per stream] in cublas_handle.h).
class ThreadHandle {
 public:
  explicit ThreadHandle(int device)
      : device_(device), workspace_bytes_(cublas_workspace_bytes(device_properties(device).major)) {
    KILN_CUBLAS_CHECK(cublasCreate(&handle_));
    // Half and bfloat16 products accumulate in float32 all the way: no split-K partial
    // sums rounded to the output type (the "reduced precision reduction" cuBLAS may
    // otherwise use), so the result is one rounding of a float32 sum, as on the CPU.
    KILN_CUBLAS_CHECK(cublasSetMathMode(
        handle_, static_cast<cublasMath_t>(CUBLAS_DEFAULT_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)));
  }

  // Runs at thread exit, before the CUDA runtime is torn down; errors are ignored because
  // a destructor must not throw and nothing can be done about them then.
  ~ThreadHandle() {
    for (const Workspace& workspace : workspaces_) {
      try {
        raw_free(workspace.ptr);
      } catch (...) {
      }
    }
    cublasDestroy(handle_);
  }

  ThreadHandle(const ThreadHandle&) = delete;
  ThreadHandle& operator=(const ThreadHandle&) = delete;

  cublasHandle_t bind(Stream stream) {
    KILN_ASSERT(stream.device() == device_, "cublas_handle: stream of device ", stream.device(),
                " given to the handle of device ", device_);
    KILN_CUBLAS_CHECK(cublasSetStream(handle_, stream.handle()));
    // After cublasSetStream, which resets the workspace to cuBLAS's own pool.
    KILN_CUBLAS_CHECK(cublasSetWorkspace(handle_, workspace_for(stream), workspace_bytes_));
    return handle_;
  }

 private:
  struct Workspace {
    cudaStream_t stream;
    void* ptr;
  };

  // A thread uses few streams, so a linear search is the simplest map.
  void* workspace_for(Stream stream) {
    for (const Workspace& workspace : workspaces_) {
      if (workspace.stream == stream.handle()) return workspace.ptr;
    }
    void* ptr = raw_allocate(workspace_bytes_, stream);
    workspaces_.push_back({stream.handle(), ptr});
    return ptr;
  }

  int device_;
  size_t workspace_bytes_;
  cublasHandle_t handle_ = nullptr;
  std::vector<Workspace> workspaces_;
};

}  // namespace

cublasHandle_t cublas_handle(Stream stream) {
  return thread_local_per_device<ThreadHandle>(stream.device()).bind(stream);
}

}  // namespace kiln::cuda
