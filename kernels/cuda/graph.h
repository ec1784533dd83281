// kiln::cuda::Graph: capture on a side stream, instantiate, replay, update (core/cuda_graph.h
// is the public face and says what a user sees; this is how it is done).
//
// capture_begin: a new private pool (Note [Private pools]) for the capture stream, the
// thread marked as capturing (Note [No host syncs in a capture]), the capture stream made
// current, and cudaStreamBeginCapture in thread-local mode: CUDA then refuses unsafe calls
// (a synchronize, a cudaMalloc not relaxed on purpose) from this thread only, so a loader's
// or a communication thread's work goes on. Nothing runs during a capture, so the capture
// stream needs no ordering with other streams; a replay is ordered by the stream it is
// launched on, after the work queued there before it.
// capture_end: cudaStreamEndCapture, then cudaGraphExecUpdate of the existing instance
// (same topology: the kernels' arguments change in place) or cudaGraphInstantiate. If the
// capture failed (a refused call invalidated it), everything is put back and the error is
// thrown, naming CUDA's reason.
// replay: cudaGraphLaunch on the calling thread's current stream; an event recorded after
// it lets the destructor wait for the last replay before the pool's memory is released.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <thread>

#include "core/block_allocator.h"
#include "core/host_sync.h"
#include "kernels/cuda/stream.h"

namespace kiln::cuda {

class Graph {
 public:
  explicit Graph(int device);
  ~Graph();
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  void capture_begin();
  void capture_end();
  // Ends a capture without keeping what it recorded (the captured code threw).
  void abandon();
  void replay();

  int64_t captures() const { return captures_; }
  int64_t updates() const { return updates_; }

 private:
  void abandon_capture() noexcept;
  void check_capturing_thread(const char* what) const;
  void install(cudaGraph_t graph);

  int device_;
  OwnedStream capture_stream_;
  PoolId pool_;
  // Set between capture_begin and capture_end.
  std::optional<StreamGuard> current_;
  std::optional<CaptureOnThisThread> capturing_;
  std::thread::id capturing_thread_;
  bool pool_redirected_ = false;
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
  cudaEvent_t last_replay_ = nullptr;
  int64_t captures_ = 0;
  int64_t updates_ = 0;
};

}  // namespace kiln::cuda
