// A fake device for the caching allocator's bookkeeping tests: DeviceMemory
// (core/block_allocator.h) without real memory. Addresses are made up and never
// dereferenced; a capacity makes malloc fail like a full device; events complete only
// when a test says so (or when the allocator waits for them), so every ordering is
// deterministic. tests/cuda/internal/fake_memory.h adds the pinned pool's fake host.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

#include "core/block_allocator.h"
#include "core/error.h"

namespace kiln::testing {

inline constexpr size_t kMiB = size_t{1} << 20;

// A block's address as bytes, for pointer arithmetic in the expectations.
inline char* as_bytes(void* ptr) { return static_cast<char*>(ptr); }

// Events and made-up memory, shared by both fakes.
class FakeMemoryBase {
 public:
  size_t capacity = size_t{1} << 40;  // bytes that malloc may hand out in all
  int mallocs = 0;
  int frees = 0;

  // Live allocations, by address.
  std::map<std::uintptr_t, size_t> live() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return live_;
  }
  size_t in_use() const {
    std::lock_guard<std::mutex> lock(mutex_);
    size_t total = 0;
    for (const auto& [address, size] : live_) total += size;
    return total;
  }

  struct FakeEvent {
    int device;
    StreamId stream;
    bool completed = false;
    bool released = false;
  };
  std::vector<FakeEvent> events;  // by EventId
  int waits = 0;
  int queries = 0;  // event_completed calls

  // Completes every event recorded on `stream`.
  void complete_events_on(StreamId stream) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (FakeEvent& event : events) {
      if (event.stream == stream) event.completed = true;
    }
  }
  int events_alive() const {
    std::lock_guard<std::mutex> lock(mutex_);
    int alive = 0;
    for (const FakeEvent& event : events) alive += event.released ? 0 : 1;
    return alive;
  }

 protected:
  void* fake_malloc(size_t nbytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    size_t used = 0;
    for (const auto& [address, size] : live_) used += size;
    if (used + nbytes > capacity) return nullptr;
    const std::uintptr_t address = next_address_;
    next_address_ += (nbytes + kMiB) / kMiB * kMiB + kMiB;  // a gap after every allocation
    live_.emplace(address, nbytes);
    ++mallocs;
    return reinterpret_cast<void*>(address);
  }
  void fake_free(void* ptr) {
    std::lock_guard<std::mutex> lock(mutex_);
    const size_t erased = live_.erase(reinterpret_cast<std::uintptr_t>(ptr));
    KILN_ASSERT(erased == 1, "the allocator freed memory it did not get from the fake");
    ++frees;
  }
  EventId fake_record(int device, StreamId stream) {
    std::lock_guard<std::mutex> lock(mutex_);
    events.push_back({device, stream});
    return events.size() - 1;
  }
  bool fake_completed(EventId event) {
    std::lock_guard<std::mutex> lock(mutex_);
    KILN_ASSERT(!events.at(event).released, "query of a released event");
    ++queries;
    return events.at(event).completed;
  }
  void fake_wait(EventId event) {
    std::lock_guard<std::mutex> lock(mutex_);
    events.at(event).completed = true;
    ++waits;
  }
  void fake_release(EventId event) {
    std::lock_guard<std::mutex> lock(mutex_);
    KILN_ASSERT(!events.at(event).released, "an event released twice");
    events.at(event).released = true;
  }

 private:
  mutable std::mutex mutex_;
  std::map<std::uintptr_t, size_t> live_;
  std::uintptr_t next_address_ = std::uintptr_t{1} << 32;  // 1 MiB aligned, like cudaMalloc's 256 B and more
};

class FakeDevice final : public DeviceMemory, public FakeMemoryBase {
 public:
  void* malloc(size_t nbytes) override { return fake_malloc(nbytes); }
  void free(void* ptr) override { fake_free(ptr); }
  EventId record_event(StreamId stream) override { return fake_record(0, stream); }
  bool event_completed(EventId event) override { return fake_completed(event); }
  void wait_event(EventId event) override { fake_wait(event); }
  void release_event(EventId event) override { fake_release(event); }
  size_t free_bytes() override { return capacity - in_use(); }
  size_t total_bytes() override { return capacity; }
};

}  // namespace kiln::testing
