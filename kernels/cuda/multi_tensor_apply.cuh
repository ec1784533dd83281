// Multi-tensor apply: one kernel launch works on a whole list of tensors (Note
// [Multi-tensor kernels] in core/backend.h). Used by multi_tensor_optim.cu (SGD, Adam,
// RMSprop, step counters), multi_tensor_scale.cu and multi_tensor_norm.cu.
//
// The host side (multi_tensor_plan.h) cuts the lists into 64K-element chunks, one block
// each, and packs their addresses into TensorListMeta kernel arguments; the kernel here
// finds its block's chunk and hands it to a functor (what the call computes).
//
// Inside a block: the functor walks its chunk with for_each_lane_group(), kIlp elements
// per thread per iteration (instruction-level parallelism: kIlp independent loads in
// flight). When every list's address in the chunk is aligned to kIlp elements (chunks
// start at multiples of kChunkSize, so the tensor's base decides), the kIlp elements are
// adjacent and move as one vector (16 bytes for float32); otherwise they are kThreads
// apart (still coalesced across the warp) and each is loaded alone, masked at the
// chunk's end. Values are computed in the opmath type (float for float16 and bfloat16,
// Note [Opmath] in core/dtype.h).
#pragma once

#include <cuda_runtime.h>

#include <array>
#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "kernels/cuda/aligned_vector.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_types.cuh"
#include "kernels/cuda/multi_tensor_plan.h"

namespace kiln::cuda::multi_tensor {

// What one block works on: list d's tensor starts at ptrs[d]; the block's chunk is its
// elements [begin, begin + n); `block` numbers the block among all launches of the call.
template <int kDepth>
struct Chunk {
  void* ptrs[kDepth];
  int64_t begin, n, block;

  // List d's chunk, typed (for a list that holds one value per tensor, such as the step
  // counters, use ptrs[d] itself).
  template <typename T>
  __device__ __forceinline__ T* list(int d) const {
    return static_cast<T*>(ptrs[d]) + begin;
  }
};

template <typename T>
using Vec = AlignedVector<T, kIlp>;

// True when p is aligned for Vec<T> accesses.
template <typename T>
__device__ __forceinline__ bool vector_aligned(const T* p) {
  return is_vector_aligned<kIlp>(p);
}

// r[k] = element k of `lanes` in p, in opmath (masked elements read as 0).
template <typename T, typename V>
__device__ __forceinline__ void load_lanes(V (&r)[kIlp], const T* p, Lanes<true> lanes) {
  const Vec<T> v = *reinterpret_cast<const Vec<T>*>(p + lanes.first);
#pragma unroll
  for (int k = 0; k < kIlp; ++k) r[k] = static_cast<V>(to_opmath(v.values[k]));
}
template <typename T, typename V>
__device__ __forceinline__ void load_lanes(V (&r)[kIlp], const T* p, Lanes<false> lanes) {
#pragma unroll
  for (int k = 0; k < kIlp; ++k) {
    const int64_t i = lanes.first + k * lanes.stride;
    r[k] = i < lanes.n ? static_cast<V>(to_opmath(p[i])) : V(0);
  }
}

// Element k of `lanes` in p = r[k], rounded to T (masked elements untouched).
template <typename T, typename V>
__device__ __forceinline__ void store_lanes(T* p, const V (&r)[kIlp], Lanes<true> lanes) {
  Vec<T> v;
#pragma unroll
  for (int k = 0; k < kIlp; ++k) v.values[k] = from_opmath<T>(r[k]);
  *reinterpret_cast<Vec<T>*>(p + lanes.first) = v;
}
template <typename T, typename V>
__device__ __forceinline__ void store_lanes(T* p, const V (&r)[kIlp], Lanes<false> lanes) {
#pragma unroll
  for (int k = 0; k < kIlp; ++k) {
    const int64_t i = lanes.first + k * lanes.stride;
    if (i < lanes.n) p[i] = from_opmath<T>(r[k]);
  }
}

// Calls body(lanes) for every group of kIlp elements of this thread in a chunk of n
// elements (walk_chunk in multi_tensor_plan.h): vector groups when `aligned`. The block
// size is the constant kThreads (every launch uses it, as __launch_bounds__ says), not
// blockDim.x: the lanes' offsets (k * kThreads) are then immediates, which takes the
// register count of the float32 Adam kernel from 118 to 64 (two blocks per SM, not one).
template <typename Body>
__device__ __forceinline__ void for_each_lane_group(int64_t n, bool aligned, Body&& body) {
  walk_chunk(threadIdx.x, kThreads, n, aligned, body);
}

// ==== kernel ====================================================================================

// Block b works on chunk block_to_chunk[b] of tensor slot block_to_tensor[b].
template <int kDepth, typename F>
__global__ void __launch_bounds__(kThreads) multi_tensor_kernel(TensorListMeta<kDepth> meta, F f) {
  const int tensor = meta.block_to_tensor[blockIdx.x];
  Chunk<kDepth> chunk;
#pragma unroll
  for (int d = 0; d < kDepth; ++d) chunk.ptrs[d] = meta.addresses[d][tensor];
  chunk.begin = static_cast<int64_t>(meta.block_to_chunk[blockIdx.x]) * kChunkSize;
  const int64_t left = meta.sizes[tensor] - chunk.begin;
  chunk.n = left < kChunkSize ? left : kChunkSize;
  chunk.block = meta.first_block + blockIdx.x;
  f(chunk);
}

// ==== launcher ==================================================================================

// Runs f over every chunk of the parallel lists `lists` (plan_launches in
// multi_tensor_plan.h says how they are cut and numbered) on `stream`; returns the block
// number after the last.
template <int kDepth, typename F>
int64_t multi_tensor_apply(const std::array<const std::vector<Tensor>*, kDepth>& lists, const F& f,
                           cudaStream_t stream, int64_t first_block = 0) {
  static_assert(sizeof(F) <= kFunctorBytes, "functor too big: Note [Kernel argument budget]");
  static_assert(sizeof(TensorListMeta<kDepth>) + sizeof(F) <= kKernelArgBytes, "kernel arguments over 4 KB");
  return plan_launches<kDepth>(lists, first_block, [&](const TensorListMeta<kDepth>& meta, int blocks) {
    multi_tensor_kernel<kDepth, F><<<blocks, kThreads, 0, stream>>>(meta, f);
    KILN_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace kiln::cuda::multi_tensor
