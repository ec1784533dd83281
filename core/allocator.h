// Allocator: where Storage gets its bytes, one per device (the backend owns it).
//
// An allocation is a DataPtr: the address plus the function that gives it back. The
// CPU allocator returns 64-byte aligned memory (a cache line, and the widest vector
// load), so every kernel may assume aligned contiguous tensors. The CUDA backend brings
// a caching device allocator behind the same interface.
#pragma once

#include <cstddef>
#include <functional>

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

}  // namespace kiln
