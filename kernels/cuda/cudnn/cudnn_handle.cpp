// One cuDNN handle per (device, thread), bound to the current stream at each use
// (cudnn_handle.h).
#include "kernels/cuda/cudnn/cudnn_handle.h"

#include "core/error.h"
#include "kernels/cuda/cudnn/cudnn_check.h"
#include "kernels/cuda/runtime.h"
#include "kernels/cuda/thread_local_per_device.h"

namespace kiln::cuda {
namespace {

// A cuDNN handle of one device, owned by one thread.
class ThreadHandle {
 public:
  explicit ThreadHandle(int device) : device_(device) { KILN_CUDNN_CHECK(cudnnCreate(&handle_)); }
  // Runs at thread exit; a destructor must not throw, so the status is ignored.
  ~ThreadHandle() { cudnnDestroy(handle_); }
  ThreadHandle(const ThreadHandle&) = delete;
  ThreadHandle& operator=(const ThreadHandle&) = delete;

  cudnnHandle_t bind(Stream stream) {
    KILN_ASSERT(stream.device() == device_, "cudnn_handle: stream of device ", stream.device(),
                " given to the handle of device ", device_);
    KILN_CUDNN_CHECK(cudnnSetStream(handle_, stream.handle()));
    return handle_;
  }

 private:
  int device_;
  cudnnHandle_t handle_ = nullptr;
};

}  // namespace

cudnnHandle_t cudnn_handle(Stream stream) {
  return thread_local_per_device<ThreadHandle>(stream.device()).bind(stream);
}

}  // namespace kiln::cuda
