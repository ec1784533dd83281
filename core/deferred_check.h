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
#pragma once

#include <functional>
#include <vector>

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
  std::vector<DeferredCheck> pending_;
};

// For backends: queues `check` in this thread's DeferIndexChecks scope and returns true,
// or returns false when there is none (the caller checks now).
bool defer_index_check(DeferredCheck check);

}  // namespace kiln
