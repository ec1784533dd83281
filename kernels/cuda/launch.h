// What every CUDA backend call shares: the launch constants, grid sizing, and the
// preamble that puts the call on its device and stream.
//
//   kBlockThreads   threads per block of Kiln's kernels unless a kernel says otherwise
//                   (the multi-tensor apply uses 512, multi_tensor_plan.h says why):
//                   8 warps, enough to hide latency in one block, few enough that 8
//                   blocks fit an SM (2048 threads on Hopper) and registers are not the limit.
//   grid_stride_blocks(items, device, blocks_per_sm)   the grid of a grid-stride loop:
//                   one thread per item up to `blocks_per_sm` blocks on each SM, since
//                   beyond the resident blocks more blocks only cost scheduling.
//   grid_dim(n)     a grid dimension that must fit (2^31 - 1 blocks along x); checked.
//
//   const OnDevice on(out.device().index);      // the device current for the scope
//   kernel<<<blocks, kBlockThreads, 0, on.stream.handle()>>>(...);
//
// Every backend entry point runs on its tensors' device (a DeviceGuard, restored after)
// and on the calling thread's current stream there (stream.h); OnDevice is those two
// lines, written once.
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/error.h"
#include "kernels/cuda/runtime.h"
#include "kernels/cuda/stream.h"

namespace kiln::cuda {

inline constexpr int kBlockThreads = 256;
inline constexpr int kWarpSize = 32;

constexpr int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Blocks of `threads` threads for a grid-stride loop over `items` items on `device`: one
// item per thread, at most `blocks_per_sm` blocks per multiprocessor, at least one block.
inline unsigned grid_stride_blocks(int64_t items, int device, int64_t blocks_per_sm, int threads = kBlockThreads) {
  const int64_t cap = blocks_per_sm * std::max(1, device_properties(device).multiprocessors);
  return static_cast<unsigned>(std::max<int64_t>(1, std::min(ceil_div(items, threads), cap)));
}

// How many blocks of `threads` threads one multiprocessor of `device` holds at once (by
// thread count; registers or shared memory may allow fewer).
inline int64_t resident_blocks_per_sm(int device, int threads = kBlockThreads) {
  return std::max(1, device_properties(device).max_threads_per_multiprocessor / threads);
}

// `blocks` as a grid dimension; a kiln internal error when it is 0 or past the x limit.
inline unsigned grid_dim(int64_t blocks) {
  KILN_ASSERT(blocks >= 1 && blocks <= INT32_MAX, "CUDA grid dimension out of range: ", blocks);
  return static_cast<unsigned>(blocks);
}

// A backend call's device and stream: `device` is current while this lives, and `stream`
// is the calling thread's current stream on it.
struct OnDevice {
  explicit OnDevice(int device) : guard(device), stream(current_stream(device)) {}

  DeviceGuard guard;  // first: the stream is looked up with the device current
  const Stream stream;
};

}  // namespace kiln::cuda
