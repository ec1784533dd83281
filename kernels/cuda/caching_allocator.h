// The caching device allocator: cudaMalloc once, reuse forever.
//
// cudaMalloc and cudaFree are slow (cudaFree synchronizes the whole device), and a
// training step frees and re-allocates the same tensor sizes thousands of times. So, as
// in production frameworks, freed blocks go back to a cache and are handed out again:
//   - sizes are rounded up (512-byte steps for small requests, 2 MiB segments for large
//     ones), and requests of at most 1 MiB come from a small pool carved out of 2 MiB
//     segments, larger ones from a large pool (segments of the request rounded to 2 MiB,
//     or 20 MiB buffers for requests between 1 and 10 MiB);
//   - a cached block larger than the request is split and the remainder kept; on free, a
//     block merges with free neighbours of the same segment;
//   - blocks belong to the stream they were allocated on, and are reused only for
//     allocations on that stream (stream order makes that safe without any sync). A
//     block also used on another stream must be recorded (record_stream); when it is
//     freed, an event is queued on each such stream and the block returns to the cache
//     only once those events have completed;
//   - when cudaMalloc fails, the cache's unused segments are released (cudaFree) and the
//     allocation is tried once more; if it fails again, a kiln::Error says how many
//     bytes were requested, allocated, reserved and free on the device.
// The environment variable KILN_CUDA_NO_CACHING=1 bypasses the cache (every allocation
// is a cudaMalloc, every free a cudaFree after a device sync), so compute-sanitizer sees
// each buffer's true bounds.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/allocator.h"
#include "core/block_allocator.h"
#include "kernels/cuda/allocator_stats.h"
#include "kernels/cuda/stream.h"

namespace kiln::cuda {

// Kiln's Allocator (core/allocator.h) for `device`: blocks on the current stream.
Allocator& device_allocator(int device);

// Raw blocks for workspaces (cuBLAS, cuDNN) on `stream`; free with raw_free.
void* raw_allocate(size_t nbytes, Stream stream);
void raw_free(void* ptr);

// Marks the block that holds `ptr` (a pointer from this allocator) as used on `stream`
// too: it is not reused before the work queued on `stream` up to its free has finished.
void record_stream(void* ptr, Stream stream);

// Note [Private pools] in core/block_allocator.h: allocations for `stream` (a capturing
// stream of its device) come from `pool` until end_private_pool.
void begin_private_pool(Stream stream, PoolId pool);
void end_private_pool(Stream stream);
// The graph that used `pool` on `device` is gone: its memory goes back to the device.
void release_private_pool(int device, PoolId pool);
// A new pool id, unique in the process.
PoolId new_private_pool_id();

AllocatorStats memory_stats(int device);
void reset_peak_memory_stats(int device);
// Releases every cached, unused segment of every device to the driver (cudaFree).
void empty_cache();
// True when KILN_CUDA_NO_CACHING=1 was set at the first allocation.
bool caching_disabled();

}  // namespace kiln::cuda
