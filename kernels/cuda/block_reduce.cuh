// The one block-wide reduction of the CUDA kernels: how the threads of a block combine
// their partial states (Welford triples, sums, maxima, online-softmax pairs), in a fixed
// order, so every result is deterministic. Two policies:
//
//   1-D: every thread of the block contributes one state (the block's threads taken in
//        order, x fastest, y next): a tree of shuffles within each warp, then the warps'
//        states in order.
//          block_reduce(v, combine)     thread 0 gets the combination
//          block_allreduce(v, combine)  every thread gets it
//   2-D: blockDim = (x, y), y a power of two: each column x (the blockDim.y threads of
//        one output: a channel, an output of an outer reduction) combines its states in
//        shared memory by a tree over y.
//          block_reduce_columns(v, shared, combine)   thread (x, 0) gets column x's
//
// `combine(a, b)` must be associative (the trees regroup the states; they never reorder
// them for a commutative-only combine). Every thread of the block must call, with at most
// 1024 threads. Each call ends with a barrier, so a kernel may call again at once.
//
//   const State total = block_reduce(mine, [&](const State& a, const State& b) { return r.combine(a, b); });
//   if (threadIdx.x == 0 && threadIdx.y == 0) r.write(total, channel);
#pragma once

#include <cuda_runtime.h>

#include "kernels/cuda/warp_shuffle.cuh"

namespace kiln::cuda {

namespace block_reduce_detail {

__device__ __forceinline__ int thread_rank() { return threadIdx.y * blockDim.x + threadIdx.x; }
__device__ __forceinline__ int warps_in_block() { return (blockDim.x * blockDim.y + 31) / 32; }

}  // namespace block_reduce_detail

template <typename S, typename F>
__device__ S block_reduce(S value, const F& combine) {
  __shared__ S warp_states[32];
  const int rank = block_reduce_detail::thread_rank(), lane = rank % 32, warp = rank / 32;
#pragma unroll
  for (int delta = 16; delta > 0; delta /= 2) value = combine(value, shuffle_down(value, delta));
  if (lane == 0) warp_states[warp] = value;
  __syncthreads();
  if (rank == 0) {
    for (int w = 1; w < block_reduce_detail::warps_in_block(); ++w) value = combine(value, warp_states[w]);
  }
  __syncthreads();  // warp_states may be written by the next call
  return value;
}

template <typename S, typename F>
__device__ S block_allreduce(S value, const F& combine) {
  __shared__ S warp_states[32];
  const int rank = block_reduce_detail::thread_rank();
  value = warp_allreduce(value, combine);
  if (rank % 32 == 0) warp_states[rank / 32] = value;
  __syncthreads();
  value = warp_states[0];
  for (int w = 1; w < block_reduce_detail::warps_in_block(); ++w) value = combine(value, warp_states[w]);
  __syncthreads();  // warp_states may be written by the next call
  return value;
}

// `shared` holds blockDim.x * blockDim.y states (the caller's static or dynamic shared
// memory); column x's states sit at shared[y * blockDim.x + x].
template <typename S, typename F>
__device__ S block_reduce_columns(S value, S* shared, const F& combine) {
  const int slot = threadIdx.y * blockDim.x + threadIdx.x;
  shared[slot] = value;
  __syncthreads();
  for (int half = blockDim.y / 2; half > 0; half /= 2) {
    if (threadIdx.y < half) shared[slot] = combine(shared[slot], shared[slot + half * blockDim.x]);
    __syncthreads();
  }
  value = shared[threadIdx.x];
  __syncthreads();  // `shared` may be written by the next call
  return value;
}

}  // namespace kiln::cuda
