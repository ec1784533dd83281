// BusyStream (busy_stream.h). The host function runs on the CUDA runtime's callback
// thread and makes no CUDA call, as cudaLaunchHostFunc requires.
#include "tests/cuda/internal/busy_stream.h"

#include <chrono>

#include "kernels/cuda/cuda_check.h"

namespace kiln::cuda::testing {

BusyStream::BusyStream(cudaStream_t stream) : stream_(stream) {
  KILN_CUDA_CHECK(cudaLaunchHostFunc(stream_, &BusyStream::wait_for_release, this));
}

void BusyStream::wait_for_release(void* self) {
  auto* busy = static_cast<BusyStream*>(self);
  std::unique_lock<std::mutex> lock(busy->mutex_);
  busy->changed_.wait_for(lock, std::chrono::seconds(10), [busy] { return busy->released_; });
}

void BusyStream::release() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    released_ = true;
  }
  changed_.notify_all();
}

BusyStream::~BusyStream() {
  release();
  cudaStreamSynchronize(stream_);  // the host function must not outlive *this
}

}  // namespace kiln::cuda::testing
