// The pinned (page-locked) host allocator, with a cache.
//
// cudaHostAlloc is much slower than malloc (it pins pages in the kernel), so freed pinned
// blocks are cached by size (rounded up to a power of two) and reused. A pinned block may
// still be read or written by an asynchronous copy when its tensor dies (a non_blocking
// host-to-device copy from a batch the loader has already dropped): every such copy
// records an event for the block (record_host_use), and a freed block is handed out
// again only after all its events have completed.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/allocator.h"
#include "kernels/cuda/allocator_stats.h"
#include "kernels/cuda/stream.h"

namespace kiln::cuda {

// Kiln's Allocator over pinned host memory (tensors on Device::cpu()).
Allocator& pinned_host_allocator();
// Whether `ptr` lies inside a block of this allocator (or other page-locked memory).
bool is_pinned(const void* ptr);
// The block holding `ptr` is in use by work queued on `stream` (an asynchronous copy):
// it is not reused until that work has finished.
void record_host_use(const void* ptr, Stream stream);

PinnedStats pinned_stats();
// Frees cached pinned blocks whose events have completed (cudaFreeHost).
void empty_pinned_cache();

}  // namespace kiln::cuda
