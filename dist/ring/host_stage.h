// HostStage: a tensor's elements as one contiguous host buffer for the ring algorithms.
// A contiguous CPU tensor is used in place; anything else (a strided view, a GPU tensor)
// goes through a staging tensor: pinned host memory for a GPU tensor, so the copies run
// at full PCIe speed and asynchronously.
//
// Whole copies (copy_in, copy_out) serve the small messages and CPU tensors. A GPU tensor
// bound for the ring is copied by chunks instead, overlapped with the network (Note
// [Overlapped staging]): copy_in_async queues every chunk's device-to-host copy on a copy
// stream (the process group's own, made once), in the order the ring will need them, each
// with an event; wait_in(c) waits for
// chunk c only; copy_out_async(c) queues chunk c's host-to-device copy as soon as the
// ring has finished it; finish() waits for the copies.
//
// Before reading a GPU tensor the stage waits for the event recorded when the collective
// was issued (the caller's stream had queued the kernels that produce the tensor).
//
//   HostStage stage(tensor, ready);
//   stage.copy_in();
//   ring_all_reduce(collective, stage.buffer(), reduce);
//   stage.copy_out();
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <utility>

#include "core/stream.h"
#include "core/tensor.h"
#include "dist/ring/algorithms.h"

namespace kiln::dist::ring {

class HostStage {
 public:
  HostStage(const Tensor& tensor, const std::shared_ptr<Event>& ready);
  HostBuffer buffer() const;
  const Tensor& host() const { return host_; }
  bool on_gpu() const { return tensor_.device().is_cuda(); }

  void copy_in();
  // Writes the buffer back into the tensor (nothing to do when it was used in place).
  void copy_out();

  // Chunk c is elements [bounds[c], bounds[c + 1]); `order`, the chunks as the ring needs them.
  void copy_in_async(const Stream& copies, const std::vector<int64_t>& bounds,
                     const std::vector<int64_t>& order);
  void wait_in(int64_t chunk);
  void copy_out_async(int64_t chunk);
  void finish();

 private:
  Tensor slice(const Tensor& t, int64_t chunk) const;
  Tensor tensor_;
  Tensor device_;  // a GPU tensor, contiguous (itself or a copy)
  Tensor host_;    // the tensor itself, or its staging copy
  std::optional<Stream> copies_;
  std::vector<int64_t> bounds_;
  std::map<int64_t, Event> copied_in_;
};

// Records an event on the current stream of the tensor's device (nothing on the CPU).
std::shared_ptr<Event> record_ready(const Tensor& tensor);

}  // namespace kiln::dist::ring
