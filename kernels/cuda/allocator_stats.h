// The statistics of the caching device allocator (memory_stats in caching_allocator.h)
// and of the pinned host allocator (pinned_stats in pinned_allocator.h), in a header of
// their own so the CUDA-free bookkeeping (block_allocator.h, pinned_pool.h) fills them.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kiln::cuda {

struct AllocatorStats {
  size_t allocated_bytes = 0;       // in blocks handed out now (rounded sizes)
  size_t reserved_bytes = 0;        // obtained with cudaMalloc and not yet released
  size_t peak_allocated_bytes = 0;  // since start or reset_peak_memory_stats
  size_t peak_reserved_bytes = 0;
  size_t requested_bytes = 0;       // as asked for, before rounding
  int64_t active_blocks = 0;        // handed out now
  int64_t cached_blocks = 0;        // free in the cache now
  int64_t device_mallocs = 0;       // cudaMalloc calls (cache misses that grew the pool)
  int64_t device_frees = 0;         // cudaFree calls (empty_cache, out-of-memory retries)
  int64_t oom_retries = 0;          // cudaMalloc failures retried after freeing the cache
  int64_t ooms = 0;                 // allocations that failed for good
};

struct PinnedStats {
  size_t allocated_bytes = 0;  // handed out now
  size_t reserved_bytes = 0;   // obtained with cudaHostAlloc
  int64_t host_allocs = 0;     // cudaHostAlloc calls
  int64_t host_frees = 0;      // cudaFreeHost calls (empty_pinned_cache, out-of-memory retries)
  int64_t cached_blocks = 0;   // free and reusable (events completed or pending)
};

}  // namespace kiln::cuda
