// HostStage: a tensor's elements as one contiguous host buffer for the ring algorithms.
// A contiguous CPU tensor is used in place; anything else (a strided view, a GPU tensor)
// is copied into a staging tensor, pinned host memory for a GPU tensor so the copies run
// at full PCIe speed, and copied back by copy_out().
//
// Before reading a GPU tensor the stage waits for the event recorded when the collective
// was issued (the caller's stream had queued the kernels that produce the tensor).
//
//   HostStage stage(tensor, /*copy_in=*/true, ready);
//   ring_all_reduce(collective, stage.buffer(), reduce);
//   stage.copy_out();
#pragma once

#include <memory>

#include "core/stream.h"
#include "core/tensor.h"
#include "dist/ring/algorithms.h"

namespace kiln::dist::ring {

class HostStage {
 public:
  HostStage(const Tensor& tensor, bool copy_in, const std::shared_ptr<Event>& ready);
  HostBuffer buffer() const;
  const Tensor& host() const { return host_; }
  // Writes the buffer back into the tensor (nothing to do when it was used in place).
  void copy_out() const;

 private:
  Tensor tensor_;
  Tensor host_;  // the tensor itself, or its staging copy
};

// Records an event on the current stream of the tensor's device (nothing on the CPU).
std::shared_ptr<Event> record_ready(const Tensor& tensor);

}  // namespace kiln::dist::ring
