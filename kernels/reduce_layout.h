// The layout of a reduction, shared by the CPU engine (kernels/cpu/reduce.cpp) and the
// CUDA planner (kernels/cuda/reduce_plan.h): which input elements meet which output.
//
// Dims of size 1 are dropped; the rest split into kept dims (those of the output) and
// reduced dims. Each group is sorted so that its smallest input stride is innermost, and
// neighbours contiguous with each other in every operand are merged: a contiguous
// [N, C, H, W] reduced over {H, W} becomes kept [N*C] x reduced [H*W]. The loop order
// follows: an inner reduction when the innermost reduced dim has the smaller input stride
// (each output's elements lie along a row: sum over the last dim), an outer one when the
// innermost kept dim has (sum over dim 0 of a row-major matrix). Plain C++, host only.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "core/dims.h"
#include "core/pooled.h"

namespace kiln {

// One loop dim after coalescing: its size and element strides in the input and in up to
// two outputs (arg_reduce and var_mean write two; a reduced dim has output strides 0).
struct ReduceDim {
  int64_t size = 1;
  std::array<int64_t, 3> strides{};  // input, output 0, output 1
};

// A group of dims, from the pool of small blocks (Note [Pooled small blocks]): a small
// reduction makes two, and malloc's share of its host cost was a fifth (bench/host_cost).
using ReduceDims = std::vector<ReduceDim, PooledAllocator<ReduceDim>>;

struct ReduceLayout {
  ReduceDims kept;     // outermost first; a lone size-1 dim when all is reduced
  ReduceDims reduced;  // outermost first; a lone size-1 dim when nothing is
  int64_t kept_numel = 1;
  int64_t reduced_numel = 1;
  bool outer = false;  // the innermost kept dim has the smaller input stride
};

// Sorts by input stride, largest first (stable: ties keep their order), then merges each
// dim into its outer neighbour when they are contiguous with each other in every operand.
// An empty group becomes a lone size-1 dim.
ReduceDims coalesce_dims(ReduceDims group);

// The layout of an input of `sizes` and `in_strides` reduced over `reduce_dims` (sorted,
// unique) into keepdim-form outputs with `out0_strides` and `out1_strides` (empty: one
// output).
ReduceLayout make_reduce_layout(IntList sizes, IntList in_strides, IntList out0_strides, IntList out1_strides,
                                IntList reduce_dims);

}  // namespace kiln
