// CUDA events (RAII): a marker queued on a stream that completes when the work queued
// before it has finished. Kiln uses them to order streams (stream B waits for an event
// recorded on stream A), to know when the caching allocators may reuse a block that
// another stream or an asynchronous copy still reads, and to time kernels in benchmarks.
#pragma once

#include <cuda_runtime_api.h>

#include "kernels/cuda/stream.h"

namespace kiln::cuda {

class Event {
 public:
  // Timing events cost more to record; ordering-only events use cudaEventDisableTiming.
  explicit Event(bool enable_timing = false);
  ~Event();
  Event(Event&& other) noexcept;
  Event& operator=(Event&& other) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  // Queues the event on `stream` (creating it lazily on the stream's device).
  void record(Stream stream);
  // Makes all later work on `stream` wait until this event has completed (no host block).
  void block(Stream stream) const;
  // True when the work before the event has finished, or the event was never recorded.
  bool query() const;
  // Blocks the host until the event has completed.
  void synchronize() const;
  // Milliseconds between `start` and this event (both recorded with timing enabled).
  float elapsed_ms_since(const Event& start) const;

  bool recorded() const { return event_ != nullptr; }
  int device() const { return device_; }
  cudaEvent_t handle() const { return event_; }

 private:
  bool enable_timing_;
  int device_ = -1;
  cudaEvent_t event_ = nullptr;
};

}  // namespace kiln::cuda
