// The statistics of the pinned host allocator (pinned_stats in pinned_allocator.h), in a
// header of their own so the CUDA-free bookkeeping (pinned_pool.h) fills them; the caching
// device allocator reports core's AllocatorStats (core/allocator_stats.h), as the CPU's does.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/allocator_stats.h"

namespace kiln::cuda {

struct PinnedStats {
  size_t allocated_bytes = 0;  // handed out now
  size_t reserved_bytes = 0;   // obtained with cudaHostAlloc
  int64_t host_allocs = 0;     // cudaHostAlloc calls
  int64_t host_frees = 0;      // cudaFreeHost calls (empty_pinned_cache, out-of-memory retries)
  int64_t cached_blocks = 0;   // free and reusable (events completed or pending)
};

}  // namespace kiln::cuda
