// CudaGraph: a sequence of GPU work recorded once and replayed with one launch.
//
//   CudaGraph graph(Device::cuda());
//   warm_up();                  // cuDNN searches, lazily made state: eagerly, before capture
//   graph.capture_begin();
//   Tensor loss = step(static_input);   // recorded, not run
//   graph.capture_end();
//   for (...) { static_input.copy_(next_batch, true); graph.replay(); read(loss); }
//
// Between capture_begin and capture_end the calling thread's work on the device goes to
// a side stream whose kernels are recorded, not run. Every tensor allocated meanwhile comes
// from the graph's private pool of the caching allocator (Note [Private pools] in
// core/block_allocator.h): replays write into the same addresses, so tensors made during
// the capture (the loss, the gradients) hold each replay's results, and no eager work is
// ever handed that memory while the graph lives. A host sync on the device during the
// capture is an error naming it (Note [No host syncs in a capture], core/host_sync.h), as
// is a copy from pageable host memory. replay() launches the graph on the calling thread's
// current stream, ordered after the work queued there before it. Capturing again (another
// input shape) re-records the graph and updates the launchable instance in place when the
// graph's shape of work is unchanged (cudaGraphExecUpdate), else makes a new one.
// Destroying the graph waits for its last replay and gives its pool back.
//
// On a device without graphs (the CPU) every call is an error; callers that run on either
// check device.is_cuda() first (the trainer's --cuda-graphs says it runs eagerly).
#pragma once

#include <cstdint>
#include <functional>

#include "core/device.h"

namespace kiln {

class CudaGraph {
 public:
  explicit CudaGraph(Device device);
  ~CudaGraph();
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;

  void capture_begin();
  // Ends the capture and instantiates (or updates) the graph. If the capture failed,
  // throws the error and leaves the graph as it was before capture_begin. Only the thread
  // that began the capture may end it.
  void capture_end();
  // Ends a capture without keeping what it recorded.
  void abandon_capture();
  // capture_begin, `body`, capture_end; if `body` throws, the capture is abandoned (the
  // thread's stream and allocations are back to normal) and the exception goes on.
  void capture(const std::function<void()>& body);
  void replay();

  Device device() const { return device_; }
  int64_t captures() const;  // completed captures
  int64_t updates() const;   // captures that updated the previous instance in place

 private:
  Device device_;
  void* handle_ = nullptr;
};

}  // namespace kiln
