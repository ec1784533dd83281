// CudaGraph (cuda_graph.h): the public face over the backend's graph entries.
#include "core/cuda_graph.h"

#include "core/backend.h"
#include "core/error.h"

namespace kiln {

CudaGraph::CudaGraph(Device device) : device_(device) {
  KILN_CHECK(device.is_cuda(), "CudaGraph: graphs record GPU work; ", device, " has none");
  handle_ = backend(device).create_graph(device.index);
}

CudaGraph::~CudaGraph() {
  if (handle_ != nullptr) backend(device_).destroy_graph(handle_);
}

void CudaGraph::capture_begin() { backend(device_).graph_capture_begin(handle_); }
void CudaGraph::capture_end() { backend(device_).graph_capture_end(handle_); }
void CudaGraph::abandon_capture() { backend(device_).graph_capture_abandon(handle_); }

void CudaGraph::capture(const std::function<void()>& body) {
  capture_begin();
  try {
    body();
  } catch (...) {
    abandon_capture();
    throw;
  }
  capture_end();
}

void CudaGraph::replay() { backend(device_).graph_replay(handle_); }
int64_t CudaGraph::captures() const { return backend(device_).graph_captures(handle_); }
int64_t CudaGraph::updates() const { return backend(device_).graph_updates(handle_); }

}  // namespace kiln
