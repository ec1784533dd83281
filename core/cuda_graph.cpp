// CudaGraph (cuda_graph.h): the public face over the backend's graph entries, and the host
// side of a capture: the generators' device states (Note [Philox under capture]) and the
// graph's index-check flags (Note [Index checks in a CUDA graph]).
#include "core/cuda_graph.h"

#include <algorithm>
#include <array>
#include <exception>
#include <utility>

#include "core/backend.h"
#include "core/device_values.h"
#include "core/error.h"
#include "core/host_sync.h"
#include "core/ops/factory.h"
#include "core/stream.h"

namespace kiln {

CudaGraph::CudaGraph(Device device) : device_(device) {
  KILN_CHECK(device.is_cuda(), "CudaGraph: graphs record GPU work; ", device, " has none");
  handle_ = backend(device).create_graph(device.index);
  generators_.push_back({.generator = &default_generator(device), .base = {}, .blocks = 0});
}

CudaGraph::~CudaGraph() {
  if (handle_ != nullptr) backend(device_).destroy_graph(handle_);  // abandons a capture, waits for replays
  if (collecting_) end_host_side(/*keep=*/false);
}

void CudaGraph::register_generator(Generator& generator) {
  KILN_CHECK(!collecting_, "CudaGraph::register_generator: not during a capture");
  for (const CapturedGenerator& g : generators_) {
    if (g.generator == &generator) return;
  }
  generators_.push_back({.generator = &generator, .base = {}, .blocks = 0});
}

// Before the backend's capture begins, so that nothing here comes from the graph's pool
// or lands in the graph: the generators' bases and the zeroed index flags, eagerly on the
// current stream; then the generators and the index checks switched to the capture.
void CudaGraph::begin_host_side() {
  const TensorOptions on_device{.dtype = DType::Int64, .device = device_};
  for (CapturedGenerator& g : generators_) {
    if (!g.base.defined()) g.base = zeros({2}, on_device);
  }
  if (!index_flags_.defined()) index_flags_ = empty({2 * kMaxCapturedIndexChecks}, on_device);
  retire_index_checks();  // the replays' findings are read before the flags are zeroed
  try {
    index_flags_.zero_();  // after the last replay (stream order)
  } catch (...) {
    restore_retired_checks();
    throw;
  }
  try {
    for (CapturedGenerator& g : generators_) {
      g.generator->begin_capture(device_, static_cast<const uint64_t*>(g.base.data_ptr()));
      g.capturing = true;
    }
    collecting_ = std::make_unique<CapturedIndexChecks>(index_flags_);
  } catch (...) {
    for (CapturedGenerator& g : generators_) {
      if (g.capturing) g.generator->end_capture();
      g.capturing = false;
    }
    restore_retired_checks();
    throw;
  }
  capturing_thread_ = std::this_thread::get_id();
}

// After the backend's capture ended (keep: what it recorded is the graph now) or was
// abandoned; never throws.
void CudaGraph::end_host_side(bool keep) {
  for (CapturedGenerator& g : generators_) {
    if (!g.capturing) continue;
    const uint64_t blocks = g.generator->end_capture();
    if (keep) g.blocks = blocks;
    g.capturing = false;
  }
  std::vector<DeferredCheck> checks = collecting_->take();
  collecting_.reset();
  if (keep) {
    index_checks_ = std::make_shared<IndexChecks>();
    index_checks_->checks = std::move(checks);
    retired_checks_.reset();
  } else {
    restore_retired_checks();
  }
}

// A capture that did not complete leaves the graph replaying what it replayed before: so
// its index checks go on too.
void CudaGraph::restore_retired_checks() {
  if (!retired_checks_) return;
  retired_checks_->retired = false;
  index_checks_ = std::move(retired_checks_);
  retired_checks_.reset();
}

void CudaGraph::capture_begin() {
  KILN_CHECK(!collecting_, "CUDA graph: capture_begin twice without capture_end");
  KILN_CHECK(!capturing_on_this_thread(),
             "CUDA graph: a capture is already under way on this thread (captures do not nest)");
  begin_host_side();
  try {
    backend(device_).graph_capture_begin(handle_);
  } catch (...) {
    end_host_side(/*keep=*/false);
    throw;
  }
}

void CudaGraph::capture_end() {
  KILN_CHECK(collecting_, "CUDA graph: capture_end without capture_begin");
  KILN_CHECK(std::this_thread::get_id() == capturing_thread_,
             "CUDA graph: capture_end on another thread than the one that called capture_begin");
  try {
    backend(device_).graph_capture_end(handle_);  // a failure there abandons the capture
  } catch (...) {
    end_host_side(/*keep=*/false);
    throw;
  }
  end_host_side(/*keep=*/true);
}

void CudaGraph::abandon_capture() {
  KILN_CHECK(collecting_, "CUDA graph: abandon without capture_begin");
  KILN_CHECK(std::this_thread::get_id() == capturing_thread_,
             "CUDA graph: abandon on another thread than the one that called capture_begin");
  backend(device_).graph_capture_abandon(handle_);
  end_host_side(/*keep=*/false);
}

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

void CudaGraph::replay() {
  KILN_CHECK(!collecting_, "CUDA graph: replay during its own capture");
  KILN_CHECK(captures() > 0, "CUDA graph: replay before any capture_end");
  for (CapturedGenerator& g : generators_) {
    if (g.blocks == 0) continue;
    const PhiloxState start = g.generator->advance(g.blocks);
    const std::array<uint64_t, 2> words = {start.seed, start.offset};
    write_words_(g.base, words);  // stream order: before the graph reads it
  }
  backend(device_).graph_replay(handle_);
  queue_index_checks();
}

// Note [Index checks in a CUDA graph]: once while they wait in the loop's scope (keyed by
// this capture's checks), or now without a scope (a sync per replay, as an eager checked
// op costs). They read the flags after the replays queued on this stream so far.
void CudaGraph::queue_index_checks() {
  if (index_checks_->checks.empty()) return;
  const Stream stream = Stream::current(device_);
  DeferredCheck run_all = [shared = index_checks_, stream] {
    if (shared->retired) return;
    stream.synchronize();
    for (const DeferredCheck& check : shared->checks) check();
  };
  if (!defer_index_check_once(index_checks_.get(), run_all)) run_all();
}

// Before a new capture zeroes the flags: the findings of the replays so far are read now
// (a sync, at a re-capture only), and a closure still queued for them is disarmed.
void CudaGraph::retire_index_checks() {
  const std::shared_ptr<IndexChecks> old = index_checks_;
  if (!old->checks.empty()) {
    Stream::current(device_).synchronize();
    for (const DeferredCheck& check : old->checks) check();
  }
  old->retired = true;
  retired_checks_ = old;
  index_checks_ = std::make_shared<IndexChecks>();
}

int64_t CudaGraph::captures() const { return backend(device_).graph_captures(handle_); }
int64_t CudaGraph::updates() const { return backend(device_).graph_updates(handle_); }

uint64_t CudaGraph::random_blocks_per_replay(const Generator& generator) const {
  const auto it = std::find_if(generators_.begin(), generators_.end(),
                               [&](const CapturedGenerator& g) { return g.generator == &generator; });
  return it == generators_.end() ? 0 : it->blocks;
}

}  // namespace kiln
