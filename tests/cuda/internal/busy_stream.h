// A stream held busy until the test says so, for tests of memory reuse across streams.
// A host function queued on the stream (cudaLaunchHostFunc) waits for release(), so the
// work queued behind it, and any event recorded after it, are certainly not complete
// while the test checks that a block is not handed out, whatever the GPU's speed.
#pragma once

#include <cuda_runtime_api.h>

#include <condition_variable>
#include <mutex>

namespace kiln::cuda::testing {

class BusyStream {
 public:
  // Queues the waiting host function on `stream`. It gives up after ten seconds so a
  // failing test never hangs.
  explicit BusyStream(cudaStream_t stream);
  // Releases the stream and waits for everything queued on it.
  ~BusyStream();
  BusyStream(const BusyStream&) = delete;
  BusyStream& operator=(const BusyStream&) = delete;

  void release();

 private:
  static void CUDART_CB wait_for_release(void* self);

  cudaStream_t stream_;
  std::mutex mutex_;
  std::condition_variable changed_;
  bool released_ = false;
};

}  // namespace kiln::cuda::testing
