// The reduction planner (reduce_plan.h): layout first, then the launch shape.
#include "kernels/cuda/reduce_plan.h"

#include <algorithm>

namespace kiln::cuda {
namespace {

int64_t next_pow2(int64_t n) {
  int64_t p = 1;
  while (p < n) p *= 2;
  return p;
}

// Each thread of a slice folds at least this many loads before the partial states meet:
// fewer, and the split's workspace traffic and second kernel cost more than they save.
constexpr int64_t kMinLoadsPerThread = 16;

// How many slices the reduced range is cut into (1: no split), and their size.
void plan_split(ReducePlan& plan, int sm_count) {
  const int64_t target_blocks = kTargetBlocksPerSm * std::max(1, sm_count);
  const int64_t per_slice_min = int64_t{plan.lanes} * plan.vec * kMinLoadsPerThread;
  plan.slices = 1;
  plan.slice_size = plan.reduced_numel;
  if (plan.blocks >= target_blocks || plan.reduced_numel < 2 * per_slice_min) return;
  int64_t slices = std::min({ceil_div(target_blocks, plan.blocks), plan.reduced_numel / per_slice_min, kMaxSlices});
  if (slices <= 1) return;
  // Slice boundaries on vector boundaries, so that every slice's vectors stay aligned.
  plan.slice_size = ceil_div(ceil_div(plan.reduced_numel, slices), plan.vec) * plan.vec;
  plan.slices = ceil_div(plan.reduced_numel, plan.slice_size);
}

void plan_inner(ReducePlan& plan, const ReduceProblem& problem) {
  // Vector loads need each output's row contiguous and starting on a 16-byte boundary.
  const int64_t vec = std::max<int64_t>(1, 16 / problem.element_size);
  bool vectorize = problem.in_aligned_16 && plan.reduced.size() == 1 && plan.reduced[0].strides[0] == 1 &&
                   plan.reduced_numel >= 2 * vec;
  for (const ReduceDim& dim : plan.kept) vectorize = vectorize && dim.strides[0] % vec == 0;
  plan.vec = vectorize ? static_cast<int>(vec) : 1;
  // About four loads per thread before the threads of an output meet.
  plan.lanes = static_cast<int>(std::min<int64_t>(kMaxLanes, next_pow2(ceil_div(plan.reduced_numel, plan.vec * 4))));
  plan.outputs_per_block = std::max(1, kBlockThreads / plan.lanes);
  plan.blocks = ceil_div(plan.kept_numel, plan.outputs_per_block);
}

void plan_outer(ReducePlan& plan) {
  plan.vec = 1;
  plan.outputs_per_block = static_cast<int>(std::min<int64_t>(32, next_pow2(plan.kept_numel)));
  plan.lanes = static_cast<int>(
      std::min<int64_t>(kBlockThreads / plan.outputs_per_block, next_pow2(std::max<int64_t>(1, plan.reduced_numel))));
  plan.blocks = ceil_div(plan.kept_numel, plan.outputs_per_block);
}

}  // namespace

ReducePlan plan_reduction(const ReduceProblem& problem) {
  ReducePlan plan;
  static_cast<ReduceLayout&>(plan) = make_reduce_layout(problem.sizes, problem.in_strides, problem.out0_strides,
                                                        problem.out1_strides, problem.reduce_dims);
  if (plan.outer) {
    plan_outer(plan);
  } else {
    plan_inner(plan, problem);
  }
  plan_split(plan, problem.sm_count);
  return plan;
}

}  // namespace kiln::cuda
