// The allocators' event pool (event_pool.h). Driver calls run outside the pool's mutex
// except cudaEventCreate, which is rare (the pool only grows to the largest number of
// events alive at once).
#include "kernels/cuda/event_pool.h"

#include "core/error.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/runtime.h"

namespace kiln::cuda {

EventPool& EventPool::instance() {
  static EventPool* pool = new EventPool();  // leaked on purpose: Note [Leaked allocators]
  return *pool;
}

EventPool::EventId EventPool::record(int device, cudaStream_t stream) {
  DeviceGuard guard(device);
  EventId id = 0;
  cudaEvent_t event = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (unused_.size() <= static_cast<size_t>(device)) unused_.resize(static_cast<size_t>(device) + 1);
    auto& unused = unused_[static_cast<size_t>(device)];
    if (!unused.empty()) {
      id = unused.back();
      unused.pop_back();
      event = entries_[id].event;
    } else {
      KILN_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
      id = entries_.size();
      entries_.push_back({event, device});
    }
  }
  KILN_CUDA_CHECK(cudaEventRecord(event, stream));
  return id;
}

EventPool::Entry EventPool::entry(EventId event) {
  std::lock_guard<std::mutex> lock(mutex_);
  KILN_ASSERT(event < entries_.size(), "unknown event ", event);
  return entries_[event];
}

bool EventPool::completed(EventId event) {
  const Entry e = entry(event);
  DeviceGuard guard(e.device);
  const cudaError_t status = cudaEventQuery(e.event);
  if (status == cudaErrorNotReady) {
    cudaGetLastError();  // not an error: clear it so no later check reports it
    return false;
  }
  KILN_CUDA_CHECK(status);
  return true;
}

void EventPool::wait(EventId event) {
  const Entry e = entry(event);
  DeviceGuard guard(e.device);
  KILN_CUDA_CHECK(cudaEventSynchronize(e.event));
}

void EventPool::release(EventId event) {
  std::lock_guard<std::mutex> lock(mutex_);
  KILN_ASSERT(event < entries_.size(), "unknown event ", event);
  unused_[static_cast<size_t>(entries_[event].device)].push_back(event);
}

}  // namespace kiln::cuda
