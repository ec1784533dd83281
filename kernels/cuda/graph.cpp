// The CUDA graph (graph.h) and CudaBackend's graph entries over it.
#include "kernels/cuda/graph.h"

#include <exception>

#include "core/error.h"
#include "kernels/cuda/caching_allocator.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/runtime.h"

namespace kiln::cuda {

Graph::Graph(int device) : device_(device), capture_stream_(device), pool_(new_private_pool_id()) {
  DeviceGuard guard(device_);
  KILN_CUDA_CHECK(cudaEventCreateWithFlags(&last_replay_, cudaEventDisableTiming));
}

Graph::~Graph() {
  DeviceGuard guard(device_);
  if (capturing_) abandon_capture();
  // The pool's memory may be in use by the last replay: wait for it (a no-op if none ran).
  cudaEventSynchronize(last_replay_);
  cudaEventDestroy(last_replay_);
  if (exec_ != nullptr) cudaGraphExecDestroy(exec_);
  if (graph_ != nullptr) cudaGraphDestroy(graph_);
  release_private_pool(device_, pool_);
}

void Graph::capture_begin() {
  KILN_CHECK(!capturing_, "CUDA graph: capture_begin twice without capture_end");
  DeviceGuard guard(device_);
  capturing_.emplace();  // first: throws if this thread already captures, before any CUDA call
  capturing_thread_ = std::this_thread::get_id();
  try {
    begin_private_pool(capture_stream_.stream(), pool_);
  } catch (...) {
    capturing_.reset();
    throw;
  }
  pool_redirected_ = true;
  current_.emplace(capture_stream_.stream());
  const cudaError_t begun = cudaStreamBeginCapture(capture_stream_.stream().handle(), cudaStreamCaptureModeThreadLocal);
  if (begun != cudaSuccess) {
    abandon_capture();
    KILN_CUDA_CHECK(begun);
  }
}

// Puts back what capture_begin set, ending the capture if it is still under way and
// dropping what it recorded. Never throws: it runs in the destructor and on error paths.
void Graph::abandon_capture() noexcept {
  cudaGraph_t partial = nullptr;
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(capture_stream_.stream().handle(), &status) == cudaSuccess &&
      status != cudaStreamCaptureStatusNone) {
    cudaStreamEndCapture(capture_stream_.stream().handle(), &partial);
    if (partial != nullptr) cudaGraphDestroy(partial);
  }
  cudaGetLastError();  // a failed capture's error is reported by the caller, not left sticky
  current_.reset();
  if (pool_redirected_) {
    try {
      end_private_pool(capture_stream_.stream());
    } catch (const std::exception&) {  // the redirection is this graph's own: cannot be missing
    }
    pool_redirected_ = false;
  }
  capturing_.reset();
}

void Graph::abandon() {
  KILN_CHECK(capturing_, "CUDA graph: abandon without capture_begin");
  check_capturing_thread("abandon");
  DeviceGuard guard(device_);
  abandon_capture();
}

// The thread state capture_begin set (the current stream, the capture flag) is the
// capturing thread's: only that thread may end or abandon the capture.
void Graph::check_capturing_thread(const char* what) const {
  KILN_CHECK(std::this_thread::get_id() == capturing_thread_, "CUDA graph: ", what,
             " on another thread than the one that called capture_begin");
}

void Graph::capture_end() {
  KILN_CHECK(capturing_, "CUDA graph: capture_end without capture_begin");
  check_capturing_thread("capture_end");
  DeviceGuard guard(device_);
  cudaGraph_t graph = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(capture_stream_.stream().handle(), &graph);
  if (ended != cudaSuccess || graph == nullptr) {
    abandon_capture();
    KILN_CHECK(false, "CUDA graph: the capture failed (", cudaGetErrorString(ended),
               "): some call during it is not allowed while capturing, such as a synchronize, a blocking copy, "
               "or work on the legacy default stream from this thread");
  }
  current_.reset();
  pool_redirected_ = false;
  end_private_pool(capture_stream_.stream());
  capturing_.reset();
  install(graph);
}

// Makes `graph` the one replayed: the existing instance updated in place when CUDA can,
// otherwise a new instance, made before the old one is dropped, so a failure leaves the
// graph replaying what it replayed before.
void Graph::install(cudaGraph_t graph) {
  bool updated = false;
  if (exec_ != nullptr) {
    cudaGraphExecUpdateResultInfo info{};
    updated = cudaGraphExecUpdate(exec_, graph, &info) == cudaSuccess;
    if (!updated) cudaGetLastError();  // not an error: the topology changed
  }
  if (!updated) {
    cudaGraphExec_t made = nullptr;
    const cudaError_t status = cudaGraphInstantiate(&made, graph, 0);
    if (status != cudaSuccess) {
      cudaGraphDestroy(graph);
      KILN_CUDA_CHECK(status);
    }
    if (exec_ != nullptr) {
      cudaEventSynchronize(last_replay_);  // the old instance may still run
      cudaGraphExecDestroy(exec_);
    }
    exec_ = made;
  }
  if (graph_ != nullptr) cudaGraphDestroy(graph_);
  graph_ = graph;
  ++captures_;
  if (updated) ++updates_;
}

void Graph::replay() {
  KILN_CHECK(exec_ != nullptr, "CUDA graph: replay before any capture_end");
  KILN_CHECK(!capturing_, "CUDA graph: replay during its own capture");
  DeviceGuard guard(device_);
  const Stream stream = current_stream(device_);
  KILN_CUDA_CHECK(cudaGraphLaunch(exec_, stream.handle()));
  KILN_CUDA_CHECK(cudaEventRecord(last_replay_, stream.handle()));
}

// ---- CudaBackend's entries (core/backend.h) --------------------------------------------------

void* CudaBackend::create_graph(int device_index) {
  check_device_index(device_index);
  return new Graph(device_index);
}

void CudaBackend::destroy_graph(void* graph) { delete static_cast<Graph*>(graph); }
void CudaBackend::graph_capture_begin(void* graph) { static_cast<Graph*>(graph)->capture_begin(); }
void CudaBackend::graph_capture_end(void* graph) { static_cast<Graph*>(graph)->capture_end(); }
void CudaBackend::graph_capture_abandon(void* graph) { static_cast<Graph*>(graph)->abandon(); }
void CudaBackend::graph_replay(void* graph) { static_cast<Graph*>(graph)->replay(); }
int64_t CudaBackend::graph_captures(void* graph) const { return static_cast<Graph*>(graph)->captures(); }
int64_t CudaBackend::graph_updates(void* graph) const { return static_cast<Graph*>(graph)->updates(); }

}  // namespace kiln::cuda
