// The fake host memory for the pinned pool's tests (HostMemory, pinned_pool.h), on the
// fake device memory of tests/core/fake_device_memory.h (made-up addresses, events that
// complete when a test says so).
#pragma once

#include "kernels/cuda/pinned_pool.h"
#include "tests/core/fake_device_memory.h"

namespace kiln::cuda::testing {

using kiln::testing::as_bytes;
using kiln::testing::FakeDevice;
using kiln::testing::FakeMemoryBase;
using kiln::testing::kMiB;

class FakeHost final : public HostMemory, public FakeMemoryBase {
 public:
  void* alloc(size_t nbytes) override { return fake_malloc(nbytes); }
  void free(void* ptr) override { fake_free(ptr); }
  EventId record_event(int device, StreamId stream) override { return fake_record(device, stream); }
  bool event_completed(EventId event) override { return fake_completed(event); }
  void release_event(EventId event) override { fake_release(event); }
};

}  // namespace kiln::cuda::testing
