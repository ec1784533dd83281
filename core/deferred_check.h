// Deferred index checks: a training loop's way to keep the GPU's index bound checks
// without a host sync in every step.
//
// Note [Deferred index checks]: a CUDA gather, scatter_add or index_select must read back
// a flag to turn an out-of-range index into a kiln::Error (Note [Index bounds on the
// device] in kernels/cuda/index.cu), which waits for the GPU: cross-entropy's gather alone
// costs a training step one sync. Inside a DeferIndexChecks scope the op queues its check
// instead (the flag stays on the device, the kernel skipped the bad index, so nothing was
// read or written out of bounds) and the scope's check() runs every queued check: the
// error surfaces at the loop's next log interval, where the loop reads its loss anyway,
// and still names the op, the index and the size. Ops on the CPU check at once as always.
//
//   DeferIndexChecks deferred;            // this thread, until it goes
//   for (...) { train_step(); if (logging) { deferred.check(); log(loss.item()); } }
//   deferred.check();                     // before leaving normally
//
// One scope per thread at a time. A scope that ends with checks still queued (an
// exception is on its way out) drops them.
//
// Note [Index checks in a CUDA graph]: a graph replays its kernels without the host code
// around them, so a check queued while the step was captured would be queued once, and
// its flag, zeroed again by every replay, would hold only the last replay's finding.
// While this thread captures (CapturedIndexChecks, held by CudaGraph's capture), an op's
// flag is instead a slot of the graph's own flags, zeroed once before the capture and
// never inside the graph, so a bad index in any replay stays recorded; and the op's check
// goes to the graph, not to the scope. The graph queues its checks again after each
// replay in the thread's DeferIndexChecks scope, once while they wait there
// (defer_index_check_once), or runs them at once without a scope. A flag once set stays
// set until the graph is captured again: the error repeats until the run stops.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "core/tensor.h"

namespace kiln {

// Throws the kiln::Error of its op when the op saw a bad index; otherwise returns.
using DeferredCheck = std::function<void()>;

class DeferIndexChecks {
 public:
  DeferIndexChecks();
  ~DeferIndexChecks();
  DeferIndexChecks(const DeferIndexChecks&) = delete;
  DeferIndexChecks& operator=(const DeferIndexChecks&) = delete;

  // Runs and clears the queued checks, in order; the first failing one throws (the rest
  // are dropped: the loop stops anyway).
  void check();
  size_t pending() const { return pending_.size(); }

 private:
  friend bool defer_index_check(DeferredCheck check);
// The same, but a check whose `key` is already waiting in the scope is not queued again
// (a graph's checks after each of its replays); answers true then too.
bool defer_index_check_once(const void* key, DeferredCheck check);
  friend bool defer_index_check_once(const void* key, DeferredCheck check);
  struct Pending {
    const void* key;  // null: not deduplicated
    DeferredCheck check;
  };
  std::vector<Pending> pending_;
};

// For backends: queues `check` in this thread's DeferIndexChecks scope and returns true,
// or returns false when there is none (the caller checks now). While this thread
// captures a graph the check goes to the capture (Note [Index checks in a CUDA graph])
// and the answer is true.
bool defer_index_check(DeferredCheck check);
// The same, but a check whose `key` is already waiting in the scope is not queued again
// (a graph's checks after each of its replays); answers true then too.
bool defer_index_check_once(const void* key, DeferredCheck check);

// The capture side of Note [Index checks in a CUDA graph], for the calling thread, from
// construction to destruction (not nestable): `flags`, a zeroed Int64 tensor of
// 2 x kMaxCapturedIndexChecks elements on the capture's device, gives each checked op of
// the capture its 16-byte flag.
inline constexpr int64_t kMaxCapturedIndexChecks = 64;
class CapturedIndexChecks {
 public:
  explicit CapturedIndexChecks(Tensor flags);
  ~CapturedIndexChecks();
  CapturedIndexChecks(const CapturedIndexChecks&) = delete;
  CapturedIndexChecks& operator=(const CapturedIndexChecks&) = delete;

  // The checks the capture queued, in order (the collection is left empty).
  std::vector<DeferredCheck> take();

 private:
  friend bool defer_index_check(DeferredCheck check);
// The same, but a check whose `key` is already waiting in the scope is not queued again
// (a graph's checks after each of its replays); answers true then too.
bool defer_index_check_once(const void* key, DeferredCheck check);
  friend Tensor captured_index_flag(Device device, const char* op);
  Tensor flags_;
  int64_t used_ = 0;
  std::vector<DeferredCheck> checks_;
};

// For backends: during a capture on this thread, the next 16-byte flag of the capture's
// graph (an Int64 [2] view of its flags on `device`; a kiln::Error naming `op` when the
// step has more checked index ops than kMaxCapturedIndexChecks, or the capture is on
// another device); undefined when this thread does not capture.
Tensor captured_index_flag(Device device, const char* op);

}  // namespace kiln
