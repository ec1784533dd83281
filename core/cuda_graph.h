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
// What changes from replay to replay comes from device memory, written before each
// replay: random ops draw fresh numbers (Note [Philox under capture], core/generator.h:
// the device's default generator, and any given to register_generator), and bounds-checked
// index ops keep their findings across replays (Note [Index checks in a CUDA graph],
// core/deferred_check.h). Host code inside the captured body runs once, at the capture:
// whatever it decides (a Python-style `if`, a learning rate passed by value) is frozen
// into the graph; state the graph updates must be updated in place (a tensor replaced
// during the body leaves the graph writing the old one).
//
// A capture's first cuBLAS product on the capture stream makes that stream's cuBLAS
// workspace from the graph's pool, and the thread's cuBLAS handle keeps it: one workspace
// (4-32 MiB) per CudaGraph a thread ever captured with, so re-capture into the same graph
// (as GraphedStep does) rather than making graph after graph.
//
// On a device without graphs (the CPU) every call is an error; callers that run on either
// check device.is_cuda() first (the trainer's --cuda-graphs says it runs eagerly).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "core/deferred_check.h"
#include "core/device.h"
#include "core/generator.h"
#include "core/tensor.h"

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
  // Writes the generators' next seeds and offsets, launches the graph on the calling
  // thread's current stream, and queues the captured index checks.
  void replay();

  // Makes captures draw from `generator` with fresh numbers at each replay (the device's
  // default generator is registered from the start). `generator` must outlive the graph;
  // not during a capture.
  void register_generator(Generator& generator);

  Device device() const { return device_; }
  int64_t captures() const;  // completed captures
  int64_t updates() const;   // captures that updated the previous instance in place
  // Philox blocks one replay draws from `generator` (0 for one not registered).
  uint64_t random_blocks_per_replay(const Generator& generator) const;

 private:
  struct CapturedGenerator {
    Generator* generator = nullptr;
    Tensor base;          // Int64 [2] on the device: {seed, offset} of the next replay
    uint64_t blocks = 0;  // drawn by one replay
    bool capturing = false;  // this graph's capture has begun the generator's
  };
  void begin_host_side();
  void end_host_side(bool keep);
  void queue_index_checks();
  void retire_index_checks();
  void restore_retired_checks();

  Device device_;
  void* handle_ = nullptr;
  std::vector<CapturedGenerator> generators_;
  Tensor index_flags_;                               // Note [Index checks in a CUDA graph]
  std::unique_ptr<CapturedIndexChecks> collecting_;  // set during a capture
  std::thread::id capturing_thread_;
  // The last capture's index checks, shared with the closure queued after replays.
  struct IndexChecks {
    std::vector<DeferredCheck> checks;
    bool retired = false;  // a newer capture took over the flags: the closure does nothing
  };
  std::shared_ptr<IndexChecks> index_checks_ = std::make_shared<IndexChecks>();
  std::shared_ptr<IndexChecks> retired_checks_;  // during a capture: the previous capture's
};

}  // namespace kiln
