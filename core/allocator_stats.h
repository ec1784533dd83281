// The statistics of a caching allocator (BlockAllocator, core/block_allocator.h): the CPU
// one (cpu_memory_stats, core/allocator.h) and each GPU's (cuda::memory_stats,
// kernels/cuda/caching_allocator.h) report the same fields. "Device" mallocs and frees
// are those of the memory behind the cache: cudaMalloc/cudaFree on a GPU, aligned host
// allocations on the CPU.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kiln {

struct AllocatorStats {
  size_t allocated_bytes = 0;       // in blocks handed out now (rounded sizes)
  size_t reserved_bytes = 0;        // obtained from the memory and not yet released
  size_t peak_allocated_bytes = 0;  // since start or reset_peak_stats
  size_t peak_reserved_bytes = 0;
  size_t requested_bytes = 0;       // as asked for, before rounding
  int64_t active_blocks = 0;        // handed out now
  int64_t cached_blocks = 0;        // free in the cache now
  int64_t device_mallocs = 0;       // mallocs of the memory (cache misses that grew the pool)
  int64_t device_frees = 0;         // frees of the memory (empty_cache, out-of-memory retries)
  int64_t oom_retries = 0;          // mallocs that failed and were retried after freeing the cache
  int64_t ooms = 0;                 // allocations that failed for good
};

}  // namespace kiln
