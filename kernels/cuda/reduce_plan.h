// Host-side planning of a CUDA reduction: which elements meet which output (the layout)
// and how the work is spread over the GPU (the launch). Plain C++, no CUDA, so the host
// tests (tests/cuda/internal/test_reduce_plan.cpp) check every decision without a GPU.
//
// Layout: the CPU engine's, from kernels/reduce_layout.h (dims of size 1 are dropped; the
// rest split into kept dims (those of the output) and reduced dims; each group is sorted
// so that its smallest input stride is innermost, and neighbours contiguous with each
// other in every operand are merged. A contiguous [N, C, H, W] reduced over {H, W}
// becomes kept [N*C] x reduced [H*W]).
//
// Launch, Note [Reduction launch shapes]:
//   inner: the innermost reduced dim has the smaller input stride (reduced elements lie
//     along a row: sum over the last dim). `lanes` threads (a power of two, up to 512)
//     share one output, reading neighbouring elements of its row (vectors of `vec`
//     elements when the rows are contiguous and 16-byte aligned), and combine their
//     partial states with warp shuffles (plus shared memory past one warp). A block holds
//     max(1, 256 / lanes) outputs.
//   outer: the innermost kept dim has the smaller input stride (sum over dim 0 of a
//     row-major matrix). Neighbouring threads own neighbouring outputs (32 per block row),
//     so each load instruction reads a contiguous piece of one input row; the block's
//     other threads (`lanes` of them, along threadIdx.y) split the reduced range and
//     combine through shared memory.
//   split: when the outputs fill fewer than kTargetBlocksPerSm blocks per SM and each
//     output's reduction is long (a full sum, a sum over dim 0 of a tall matrix), the
//     reduced range is cut into `slices` (grid.y): each block writes its partial state to
//     a workspace, and a second kernel combines an output's slices and writes it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/error.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/offset_calculator.h"
#include "kernels/reduce_layout.h"

namespace kiln::cuda {

// What is reduced, in numbers: a strided input, up to two keepdim-form outputs.
// The lists are Dims (Note [Dims in place]): a launch copies the tensors' shapes into
// them without an allocation.
struct ReduceProblem {
  Dims sizes;
  Dims in_strides;
  Dims out0_strides;
  Dims out1_strides;  // empty: one output
  Dims reduce_dims;   // sorted, unique
  int64_t element_size = 4;           // bytes per input element
  bool in_aligned_16 = true;          // the input's data pointer is 16-byte aligned
  int sm_count = 132;                 // streaming multiprocessors of the device
};

// The layout (kept, reduced, their numels, `outer`: Note [Reduction launch shapes]) and
// the launch.
struct ReducePlan : ReduceLayout {
  int vec = 1;                // inner: elements per vector load (1: scalar loads)
  int lanes = 1;              // threads that share one output
  int outputs_per_block = 1;  // inner: blockDim = (lanes, outputs); outer: (outputs, lanes)
  int64_t blocks = 1;         // grid.x
  int64_t slices = 1;         // grid.y; > 1: partial states go through a workspace
  int64_t slice_size = 0;     // reduced indices per slice (a multiple of vec)
};

inline constexpr int kMaxLanes = 512;
inline constexpr int64_t kTargetBlocksPerSm = 4;
// Slices the finalize kernel combines per output at most.
inline constexpr int64_t kMaxSlices = 1024;

ReducePlan plan_reduction(const ReduceProblem& problem);

// The kernels' walker of a coalesced group (outermost first), with the strides
// first_stride .. first_stride + N - 1 of each dim (Note [Reduction indexing] in
// reduce.cuh: a group of several dims must hold fewer than 2^31 elements).
template <int N>
OffsetCalculator<N> offset_calculator_of(const ReduceDims& group, int first_stride) {
  KILN_ASSERT(!group.empty() && group.size() <= static_cast<size_t>(kMaxOffsetDims), "reduce: ", group.size(),
              " dims after coalescing");
  OffsetCalculator<N> calc;
  calc.ndim = static_cast<int>(group.size());
  int64_t numel = 1;
  for (int d = 0; d < calc.ndim; ++d) {
    const ReduceDim& dim = group[group.size() - 1 - d];  // innermost first
    numel *= dim.size;
    // A size-0 dim (an empty reduction, or softmax rows of an empty tensor) is never
    // walked, but FastDivmod(0) would divide by zero on the host while computing its magic
    // number: give it divisor 1. A single dim past 2^31 is never divided (offsets_at).
    calc.sizes[d] = FastDivmod(static_cast<uint32_t>(std::clamp<int64_t>(dim.size, 1, INT32_MAX)));
    for (int k = 0; k < N; ++k) calc.strides[d][k] = dim.strides[first_stride + k];
  }
  KILN_ASSERT(calc.ndim == 1 || numel < (int64_t{1} << 31), "reduce: a multi-dim group of ", numel,
              " elements needs 64-bit division (Note [Reduction indexing])");
  return calc;
}

}  // namespace kiln::cuda
