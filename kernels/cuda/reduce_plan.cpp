// The reduction planner (reduce_plan.h): layout first, then the launch shape.
#include "kernels/cuda/reduce_plan.h"

#include <algorithm>

#include "core/error.h"

namespace kiln::cuda {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

int64_t next_pow2(int64_t n) {
  int64_t p = 1;
  while (p < n) p *= 2;
  return p;
}

int64_t numel_of(const std::vector<PlanDim>& group) {
  int64_t n = 1;
  for (const PlanDim& dim : group) n *= dim.size;
  return n;
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
  for (const PlanDim& dim : plan.kept) vectorize = vectorize && dim.strides[0] % vec == 0;
  plan.vec = vectorize ? static_cast<int>(vec) : 1;
  // About four loads per thread before the threads of an output meet.
  plan.lanes = static_cast<int>(std::min<int64_t>(kMaxLanes, next_pow2(ceil_div(plan.reduced_numel, plan.vec * 4))));
  plan.outputs_per_block = std::max(1, kReduceBlockThreads / plan.lanes);
  plan.blocks = ceil_div(plan.kept_numel, plan.outputs_per_block);
}

void plan_outer(ReducePlan& plan) {
  plan.vec = 1;
  plan.outputs_per_block = static_cast<int>(std::min<int64_t>(32, next_pow2(plan.kept_numel)));
  plan.lanes = static_cast<int>(
      std::min<int64_t>(kReduceBlockThreads / plan.outputs_per_block, next_pow2(std::max<int64_t>(1, plan.reduced_numel))));
  plan.blocks = ceil_div(plan.kept_numel, plan.outputs_per_block);
}

}  // namespace

std::vector<PlanDim> coalesce_dims(std::vector<PlanDim> group) {
  std::stable_sort(group.begin(), group.end(),
                   [](const PlanDim& a, const PlanDim& b) { return a.strides[0] > b.strides[0]; });
  std::vector<PlanDim> merged;
  for (const PlanDim& dim : group) {
    if (!merged.empty()) {
      PlanDim& outer = merged.back();
      bool contiguous = true;
      for (int k = 0; k < 3; ++k) contiguous = contiguous && outer.strides[k] == dim.strides[k] * dim.size;
      if (contiguous) {
        outer.size *= dim.size;
        for (int k = 0; k < 3; ++k) outer.strides[k] = dim.strides[k];
        continue;
      }
    }
    merged.push_back(dim);
  }
  if (merged.empty()) merged.push_back(PlanDim{});
  return merged;
}

ReducePlan plan_reduction(const ReduceProblem& problem) {
  const size_t rank = problem.sizes.size();
  KILN_ASSERT(problem.in_strides.size() == rank && problem.out0_strides.size() == rank &&
                  (problem.out1_strides.empty() || problem.out1_strides.size() == rank),
              "plan_reduction: operands of different ranks");
  std::vector<PlanDim> kept, reduced;
  for (size_t d = 0; d < rank; ++d) {
    const int64_t size = problem.sizes[d];
    if (size == 1) continue;
    const bool is_reduced =
        std::binary_search(problem.reduce_dims.begin(), problem.reduce_dims.end(), static_cast<int64_t>(d));
    PlanDim dim{size, {problem.in_strides[d], 0, 0}};
    if (!is_reduced) {
      dim.strides[1] = problem.out0_strides[d];
      dim.strides[2] = problem.out1_strides.empty() ? 0 : problem.out1_strides[d];
    }
    (is_reduced ? reduced : kept).push_back(dim);
  }
  const bool has_kept = !kept.empty(), has_reduced = !reduced.empty();
  ReducePlan plan;
  plan.kept = coalesce_dims(std::move(kept));
  plan.reduced = coalesce_dims(std::move(reduced));
  plan.kept_numel = numel_of(plan.kept);
  plan.reduced_numel = numel_of(plan.reduced);
  plan.outer = has_kept && (!has_reduced || plan.kept.back().strides[0] < plan.reduced.back().strides[0]);
  if (plan.outer) {
    plan_outer(plan);
  } else {
    plan_inner(plan, problem);
  }
  plan_split(plan, problem.sm_count);
  return plan;
}

}  // namespace kiln::cuda
