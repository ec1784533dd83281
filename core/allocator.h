// Allocator: where Storage gets its bytes, one per device (the backend owns it).
//
// An allocation is a DataPtr: the address plus the function that gives it back. The
// CPU allocator returns 64-byte aligned memory (a cache line, and the widest vector
// load), so every kernel may assume aligned contiguous tensors. The CUDA backend brings
// a caching device allocator behind the same interface; the CPU allocator caches its
// larger blocks the same way (Note [CPU caching allocator] in allocator.cpp).
#pragma once

#include <cstddef>
#include <functional>

#include "core/allocator_stats.h"
#include "core/device.h"

namespace kiln {

struct DataPtr {
  void* data = nullptr;
  std::function<void(void*)> deleter;  // empty: memory not owned (from_blob without one)
  Device device;
};

class Allocator {
 public:
  virtual ~Allocator() = default;
  // At least `nbytes` bytes (nbytes may be 0: data may then be null). Throws kiln::Error
  // when the memory cannot be had.
  virtual DataPtr allocate(size_t nbytes) = 0;
};

inline constexpr size_t kCpuAlignment = 64;

// The process-wide 64-byte aligned CPU allocator.
Allocator& cpu_allocator();

// The CPU cache's statistics (blocks of 64 KiB and more; smaller ones come from malloc),
// as cuda::memory_stats gives a GPU's: allocated and reserved bytes now and at their
// peaks, cache hits (allocations without a device malloc) and misses.
AllocatorStats cpu_memory_stats();
void reset_peak_cpu_memory_stats();
// Any device's: the CPU cache's above, or a GPU's caching allocator (torch.cuda.
// memory_stats and reset_peak_memory_stats). Defined in core/backend.cpp.
AllocatorStats memory_stats(Device device);
void reset_peak_memory_stats(Device device);
// Gives the cached blocks no tensor uses back to the system (torch.cuda.empty_cache's
// counterpart for the host).
void empty_cpu_cache();
// False when KILN_CPU_NO_CACHING is set or the build runs under AddressSanitizer.
bool cpu_allocator_caching();
// This machine's physical memory in bytes (sysconf), 0 when the system does not say.
size_t physical_memory_bytes();

}  // namespace kiln
