// EventPool: reusable ordering-only CUDA events for the caching allocators.
//
// The device and pinned allocators record an event each time a block used by other
// streams (or by an asynchronous copy) is freed, and query it until it has completed.
// Creating and destroying a cudaEvent_t each time would cost a driver call pair per
// free, so released events are kept, per device, and recorded again. An event is named
// by an EventId, an index into the pool's table, so the allocators' bookkeeping
// (core/block_allocator.h, pinned_pool.h) never sees a CUDA type.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <mutex>
#include <vector>

namespace kiln::cuda {

class EventPool {
 public:
  using EventId = std::uint64_t;

  // The process-wide pool (never destroyed: Note [Leaked allocators]).
  static EventPool& instance();

  // Records an event (cudaEventDisableTiming) on `stream` of `device`.
  EventId record(int device, cudaStream_t stream);
  // Whether the work queued before the event has finished (never blocks).
  bool completed(EventId event);
  // Blocks the host until the event has completed.
  void wait(EventId event);
  // Gives the event back for a later record().
  void release(EventId event);

 private:
  struct Entry {
    cudaEvent_t event;
    int device;
  };
  Entry entry(EventId event);

  std::mutex mutex_;
  std::vector<Entry> entries_;                // every event ever created, by EventId
  std::vector<std::vector<EventId>> unused_;  // released events, per device
};

}  // namespace kiln::cuda
