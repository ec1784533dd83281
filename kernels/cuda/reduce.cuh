// The CUDA reduction engine: how a reduction runs, for any op struct that says what is
// reduced. The op structs (sum, mean, amax/amin, norms, Welford, argmax/argmin) are
// kernels/reduce_ops.h, shared with the CPU backend; reduce_sum.cu, reduce_norm.cu and
// reduce_arg.cu instantiate them (reduce.h); batch norm's statistics can reuse the engine.
//
// An op struct, passed to the kernels by value (all members KILN_HOST_DEVICE):
//   using In, Acc;                          input storage type, accumulator state
//   Acc identity();                         the state of an empty reduction
//   Acc reduce(Acc, opmath_t<In>, int64_t index);   folds in one element; `index` is
//                                           its position in the reduced index space
//   Acc combine(Acc, Acc);                  merges two partial states (any order: argmax
//                                           breaks ties by index, so order never matters)
//   void write(Acc, int64_t off0, int64_t off1);   projects and stores one output
//
// Layout and launch shape come from the host planner (reduce_plan.h, Note [Reduction
// launch shapes]): an inner kernel (threads of an output along its row, warp shuffles,
// shared memory past a warp), an outer kernel (threads along the outputs, coalesced; the
// reduced range split over threadIdx.y and combined in shared memory), and, for few
// outputs with long reductions, a split of the reduced range over grid.y whose partial
// states go to a workspace from the caching allocator and are combined by a finalize
// kernel (one warp per output). Every kernel overwrites its outputs.
//
// Note [Reduction indexing]: output and reduced indices are 64-bit. A group of dims that
// coalesced into one dim needs no division (offset = index * stride, 64-bit); a group of
// several dims is walked with the FastDivmod OffsetCalculator, which needs its index
// below 2^31. make_launchable (reduce.cpp) guarantees that before launching: a multi-dim
// group that is larger is first made contiguous (permuted so that it coalesces into one
// dim).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "core/error.h"
#include "core/kernel_memory.h"
#include "kernels/cuda/aligned_vector.cuh"
#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_types.cuh"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/offset_calculator.h"
#include "kernels/cuda/reduce_plan.h"
#include "kernels/cuda/warp_shuffle.cuh"

namespace kiln::cuda {

// Note [Reduction accumulators] (CUDA, reduce_sum.cu): the sum accumulator of input type T.
template <typename T>
using ReduceSumAcc = std::conditional_t<is_floating_v<T>, opmath_t<T>, int64_t>;

// What the kernels need of a plan, by value.
struct ReduceArgs {
  OffsetCalculator<3> kept;     // input, output 0, output 1
  OffsetCalculator<1> reduced;  // input
  int64_t kept_numel;
  int64_t reduced_numel;
  int64_t slice_size;
  int64_t slices;
};

// ==== device helpers =========================================================================

// Offsets of index `i` (Note [Reduction indexing]).
template <int N>
__device__ __forceinline__ std::array<int64_t, N> offsets_at(const OffsetCalculator<N>& calc, int64_t i) {
  if (calc.ndim == 1) {
    std::array<int64_t, N> offsets;
#pragma unroll
    for (int k = 0; k < N; ++k) offsets[k] = i * calc.strides[0][k];
    return offsets;
  }
  return calc.get(static_cast<uint32_t>(i));
}

// Combines the states of groups of `width` (a power of two <= 32) neighbouring lanes into
// the group's first lane. Every lane of the warp must call it.
template <typename Op>
__device__ __forceinline__ typename Op::Acc warp_combine(const Op& op, typename Op::Acc acc, int width) {
  for (int offset = width / 2; offset > 0; offset /= 2) acc = op.combine(acc, shuffle_down(acc, offset, width));
  return acc;
}

// Shared memory of the combine steps, typed per op.
template <typename Acc>
__device__ __forceinline__ Acc* shared_states() {
  extern __shared__ __align__(16) unsigned char reduce_shared[];
  return reinterpret_cast<Acc*>(reduce_shared);
}

// Folds reduced indices [begin, end) of the row at `row` into acc, this thread taking
// every `lanes`-th load from `lane` on. kVec > 1: the row is contiguous and its vectors
// aligned (the planner checked), and `begin` is a multiple of kVec.
template <typename Op, int kVec>
__device__ __forceinline__ typename Op::Acc fold_row(const Op& op, typename Op::Acc acc,
                                                     const typename Op::In* __restrict__ row,
                                                     const OffsetCalculator<1>& reduced, int64_t begin, int64_t end,
                                                     int lane, int lanes) {
  using In = typename Op::In;
  int64_t first_scalar = begin;
  if constexpr (kVec > 1) {
    const int64_t vectors = (end - begin) / kVec;
    const auto* vectors_at = reinterpret_cast<const AlignedVector<In, kVec>*>(row + begin);
#pragma unroll 4
    for (int64_t v = lane; v < vectors; v += lanes) {
      const AlignedVector<In, kVec> loaded = vectors_at[v];
#pragma unroll
      for (int k = 0; k < kVec; ++k) acc = op.reduce(acc, to_opmath(loaded.values[k]), begin + v * kVec + k);
    }
    first_scalar = begin + vectors * kVec;
  }
#pragma unroll 4
  for (int64_t i = first_scalar + lane; i < end; i += lanes) {
    acc = op.reduce(acc, load(row + offsets_at(reduced, i)[0]), i);
  }
  return acc;
}

// The reduced indices [begin, end) of this block's slice (blockIdx.y; one slice, the
// whole range, unless the planner split it).
__device__ __forceinline__ std::array<int64_t, 2> block_slice(const ReduceArgs& args) {
  const int64_t begin = static_cast<int64_t>(blockIdx.y) * args.slice_size;
  const int64_t end = begin + args.slice_size < args.reduced_numel ? begin + args.slice_size : args.reduced_numel;
  return {begin, end};
}

// An output's final state: written, or parked in the workspace when the range is split.
template <typename Op>
__device__ __forceinline__ void finish_output(const Op& op, const typename Op::Acc& acc, const ReduceArgs& args,
                                              int64_t output, typename Op::Acc* workspace) {
  if (args.slices > 1) {
    workspace[blockIdx.y * args.kept_numel + output] = acc;
  } else {
    const auto offsets = offsets_at(args.kept, output);
    op.write(acc, offsets[1], offsets[2]);
  }
}

// ==== kernels ===============================================================================

// Inner: blockDim = (lanes, outputs per block); the lanes of an output read its row.
template <typename Op, int kVec>
__global__ void reduce_inner_kernel(Op op, const typename Op::In* __restrict__ in, ReduceArgs args,
                                    typename Op::Acc* workspace) {
  using Acc = typename Op::Acc;
  const int lane = threadIdx.x, lanes = blockDim.x;
  const int64_t output = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y;
  const bool valid = output < args.kept_numel;
  const auto [begin, end] = block_slice(args);
  Acc acc = op.identity();
  if (valid) acc = fold_row<Op, kVec>(op, acc, in + offsets_at(args.kept, output)[0], args.reduced, begin, end, lane, lanes);
  // Lanes of one output are neighbours in a warp (lanes < 32) or whole warps (lanes >= 32).
  acc = warp_combine(op, acc, lanes < 32 ? lanes : 32);
  if (lanes > 32) {
    const int warps_per_output = lanes / 32;
    Acc* shared = shared_states<Acc>() + threadIdx.y * warps_per_output;
    if (lane % 32 == 0) shared[lane / 32] = acc;
    __syncthreads();
    if (lane < 32) acc = warp_combine(op, lane < warps_per_output ? shared[lane] : op.identity(), 32);
  }
  if (valid && lane == 0) finish_output(op, acc, args, output, workspace);
}

// Outer: blockDim = (outputs per block, lanes); neighbouring threads own neighbouring
// outputs, so each step of the loop reads a contiguous piece of an input row.
template <typename Op>
__global__ void reduce_outer_kernel(Op op, const typename Op::In* __restrict__ in, ReduceArgs args,
                                    typename Op::Acc* workspace) {
  using Acc = typename Op::Acc;
  const int lane = threadIdx.y, lanes = blockDim.y;
  const int64_t output = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const bool valid = output < args.kept_numel;
  const auto [begin, end] = block_slice(args);
  Acc acc = op.identity();
  if (valid) acc = fold_row<Op, 1>(op, acc, in + offsets_at(args.kept, output)[0], args.reduced, begin, end, lane, lanes);
  acc = block_reduce_columns(acc, shared_states<Acc>(),
                             [&](const Acc& a, const Acc& b) { return op.combine(a, b); });
  if (valid && lane == 0) finish_output(op, acc, args, output, workspace);
}

// After a split: one warp per output combines the output's slices and writes it.
template <typename Op>
__global__ void reduce_finalize_kernel(Op op, const typename Op::Acc* __restrict__ workspace, ReduceArgs args) {
  using Acc = typename Op::Acc;
  const int64_t output = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y;
  const bool valid = output < args.kept_numel;
  Acc acc = op.identity();
  if (valid) {
    for (int64_t s = threadIdx.x; s < args.slices; s += 32) acc = op.combine(acc, workspace[s * args.kept_numel + output]);
  }
  acc = warp_combine(op, acc, 32);
  if (valid && threadIdx.x == 0) {
    const auto offsets = offsets_at(args.kept, output);
    op.write(acc, offsets[1], offsets[2]);
  }
}

// ==== launcher ==============================================================================

// Runs `op` over `in` as `plan` says, on the current stream of `device`.
template <typename Op>
void launch_reduction(const Op& op, const typename Op::In* in, const ReducePlan& plan, int device) {
  using Acc = typename Op::Acc;
  if (plan.kept_numel == 0) return;
  const OnDevice on(device);
  ReduceArgs args{offset_calculator_of<3>(plan.kept, 0), offset_calculator_of<1>(plan.reduced, 0), plan.kept_numel,
                  plan.reduced_numel, std::max<int64_t>(1, plan.slice_size), plan.slices};
  // The split's partial states: from the caching allocator, freed (stream-ordered) on return.
  Tensor workspace;
  Acc* partials = nullptr;
  if (plan.slices > 1) {
    const int64_t bytes = plan.slices * plan.kept_numel * static_cast<int64_t>(sizeof(Acc));
    workspace = allocate_workspace(bytes, Device::cuda(device));
    partials = static_cast<Acc*>(workspace.data_ptr());
  }
  const dim3 grid(grid_dim(plan.blocks), grid_dim(plan.slices));
  const size_t shared_bytes = static_cast<size_t>(plan.lanes) * plan.outputs_per_block * sizeof(Acc);
  if (plan.outer) {
    const dim3 block(plan.outputs_per_block, plan.lanes);
    reduce_outer_kernel<Op><<<grid, block, shared_bytes, on.stream.handle()>>>(op, in, args, partials);
  } else {
    constexpr int kVec = static_cast<int>(16 / sizeof(typename Op::In));
    const dim3 block(plan.lanes, plan.outputs_per_block);
    if (plan.vec == kVec && kVec > 1) {
      reduce_inner_kernel<Op, kVec><<<grid, block, shared_bytes, on.stream.handle()>>>(op, in, args, partials);
    } else {
      KILN_ASSERT(plan.vec == 1, "reduce: planned vector width ", plan.vec, ", kernel has ", kVec);
      reduce_inner_kernel<Op, 1><<<grid, block, shared_bytes, on.stream.handle()>>>(op, in, args, partials);
    }
  }
  KILN_CUDA_CHECK_LAUNCH();
  if (plan.slices > 1) {
    constexpr int kWarpsPerBlock = 8;
    const dim3 block(32, kWarpsPerBlock);
    const int64_t blocks = (plan.kept_numel + kWarpsPerBlock - 1) / kWarpsPerBlock;
    reduce_finalize_kernel<Op><<<grid_dim(blocks), block, 0, on.stream.handle()>>>(op, partials, args);
    KILN_CUDA_CHECK_LAUNCH();
  }
}

}  // namespace kiln::cuda
