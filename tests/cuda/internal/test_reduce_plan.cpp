// The CUDA reduction planner (kernels/cuda/reduce_plan.h) on the host: which dims are
// merged, which kernel (inner/outer) is picked, vector widths, and when the reduced
// range is split over blocks. No GPU needed.
#include <gtest/gtest.h>

#include "kernels/cuda/reduce_plan.h"

namespace kiln::cuda {
namespace {

std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& sizes) {
  std::vector<int64_t> strides(sizes.size());
  int64_t s = 1;
  for (size_t d = sizes.size(); d-- > 0;) {
    strides[d] = s;
    s *= sizes[d];
  }
  return strides;
}

// A contiguous input and its contiguous keepdim output.
ReduceProblem contiguous_problem(const std::vector<int64_t>& sizes, const std::vector<int64_t>& dims,
                                 int64_t element_size = 4) {
  std::vector<int64_t> out_sizes = sizes;
  for (int64_t d : dims) out_sizes[d] = 1;
  return {sizes, contiguous_strides(sizes), contiguous_strides(out_sizes), {}, dims, element_size, true, 132};
}

TEST(CudaReducePlan, InnerDimsMergeIntoOneRowPerOutput) {
  const ReducePlan plan = plan_reduction(contiguous_problem({2, 3, 4, 5}, {2, 3}));
  ASSERT_EQ(plan.kept.size(), 1u);
  ASSERT_EQ(plan.reduced.size(), 1u);
  EXPECT_EQ(plan.kept_numel, 6);
  EXPECT_EQ(plan.reduced_numel, 20);
  EXPECT_EQ(plan.reduced[0].strides[0], 1);
  EXPECT_EQ(plan.kept[0].strides[0], 20);
  EXPECT_EQ(plan.kept[0].strides[1], 1);
  EXPECT_FALSE(plan.outer);
  EXPECT_EQ(plan.vec, 4);  // rows of 20 floats start on 80-byte boundaries
  EXPECT_EQ(plan.slices, 1);
}

TEST(CudaReducePlan, SumOverTheFirstDimIsAnOuterReduction) {
  const ReducePlan plan = plan_reduction(contiguous_problem({1000, 4096}, {0}));
  EXPECT_TRUE(plan.outer);
  EXPECT_EQ(plan.kept_numel, 4096);
  EXPECT_EQ(plan.reduced_numel, 1000);
  EXPECT_EQ(plan.outputs_per_block, 32);
  EXPECT_EQ(plan.lanes * plan.outputs_per_block, kBlockThreads);
  EXPECT_EQ(plan.vec, 1);
}

TEST(CudaReducePlan, FullReductionSplitsTheRangeOnVectorBoundaries) {
  const ReducePlan plan = plan_reduction(contiguous_problem({1 << 24}, {0}));
  EXPECT_FALSE(plan.outer);
  EXPECT_EQ(plan.kept_numel, 1);
  EXPECT_EQ(plan.lanes, kMaxLanes);
  EXPECT_GT(plan.slices, 100);
  EXPECT_LE(plan.slices, kMaxSlices);
  EXPECT_EQ(plan.slice_size % plan.vec, 0);
  EXPECT_GE(plan.slice_size * plan.slices, plan.reduced_numel);
  EXPECT_LT(plan.slice_size * (plan.slices - 1), plan.reduced_numel);
}

TEST(CudaReducePlan, FewOutputsWithLongColumnsSplitTheOuterRange) {
  const ReducePlan plan = plan_reduction(contiguous_problem({1 << 20, 4}, {0}));
  EXPECT_TRUE(plan.outer);
  EXPECT_EQ(plan.outputs_per_block, 4);
  EXPECT_GT(plan.slices, 1);
}

TEST(CudaReducePlan, ManyShortRowsNeedNoSplit) {
  const ReducePlan plan = plan_reduction(contiguous_problem({100000, 7}, {1}));
  EXPECT_FALSE(plan.outer);
  EXPECT_EQ(plan.slices, 1);
  EXPECT_EQ(plan.lanes, 2);
  EXPECT_EQ(plan.vec, 1);  // 28-byte rows are not 16-byte aligned
  EXPECT_GE(plan.blocks * plan.outputs_per_block, 100000);
}

TEST(CudaReducePlan, NonAdjacentReducedDimsStayApart) {
  const ReducePlan plan = plan_reduction(contiguous_problem({2, 3, 4}, {0, 2}));
  ASSERT_EQ(plan.reduced.size(), 2u);
  EXPECT_EQ(plan.reduced[0].size, 2);
  EXPECT_EQ(plan.reduced[1].size, 4);
  EXPECT_EQ(plan.kept_numel, 3);
  EXPECT_FALSE(plan.outer);  // the innermost reduced stride (1) beats the kept one (4)
  EXPECT_EQ(plan.vec, 1);    // two reduced dims: no contiguous row
}

TEST(CudaReducePlan, NoReducedDimsIsOneElementPerOutput) {
  const ReducePlan plan = plan_reduction(contiguous_problem({3, 5}, {}));
  EXPECT_TRUE(plan.outer);
  EXPECT_EQ(plan.reduced_numel, 1);
  EXPECT_EQ(plan.kept_numel, 15);
  EXPECT_EQ(plan.lanes, 1);
}

TEST(CudaReducePlan, SizeOneDimsAreDropped) {
  const ReducePlan plan = plan_reduction(contiguous_problem({1, 17, 1, 3}, {1, 3}));
  ASSERT_EQ(plan.kept.size(), 1u);
  EXPECT_EQ(plan.kept_numel, 1);
  EXPECT_EQ(plan.reduced_numel, 51);
  EXPECT_FALSE(plan.outer);
}

TEST(CudaReducePlan, TransposedInputReducedAlongItsLongStrideIsOuter) {
  // A [4, 6] view of a row-major [6, 4] buffer, reduced over dim 1 (stride 4).
  ReduceProblem problem{{4, 6}, {1, 4}, {1, 1}, {}, {1}, 4, true, 132};
  const ReducePlan plan = plan_reduction(problem);
  EXPECT_TRUE(plan.outer);
  EXPECT_EQ(plan.kept[0].strides[0], 1);
  EXPECT_EQ(plan.reduced[0].strides[0], 4);
}

TEST(CudaReducePlan, MisalignedOrStridedRowsUseScalarLoads) {
  ReduceProblem misaligned = contiguous_problem({64, 1024}, {1});
  misaligned.in_aligned_16 = false;
  EXPECT_EQ(plan_reduction(misaligned).vec, 1);
  // Every other element: reduced stride 2.
  ReduceProblem strided{{64, 1024}, {2048, 2}, {1, 1}, {}, {1}, 4, true, 132};
  EXPECT_EQ(plan_reduction(strided).vec, 1);
  // Half rows: eight per vector.
  EXPECT_EQ(plan_reduction(contiguous_problem({64, 1024}, {1}, 2)).vec, 8);
}

TEST(CudaReducePlan, BroadcastInputKeepsItsZeroStride) {
  // [5, 8] expanded from [1, 8] (stride 0 along dim 0), reduced over dim 0.
  ReduceProblem problem{{5, 8}, {0, 1}, {8, 1}, {}, {0}, 4, true, 132};
  const ReducePlan plan = plan_reduction(problem);
  EXPECT_EQ(plan.reduced_numel, 5);
  EXPECT_EQ(plan.reduced[0].strides[0], 0);
  EXPECT_FALSE(plan.outer);  // stride 0 < 1: each output's elements are the same address
}

TEST(CudaReducePlan, ScatteredOutputsKeepKeptDimsApart) {
  // Input contiguous [4, 6, 10] reduced over dim 2; the output is transposed in memory.
  ReduceProblem problem{{4, 6, 10}, {60, 10, 1}, {1, 4, 1}, {}, {2}, 4, true, 132};
  const ReducePlan plan = plan_reduction(problem);
  EXPECT_EQ(plan.kept.size(), 2u);
  EXPECT_EQ(plan.kept_numel, 24);
}

TEST(CudaReducePlan, EmptyReductionsHaveNoSplit) {
  const ReducePlan reduced_empty = plan_reduction(contiguous_problem({3, 0, 2}, {1}));
  EXPECT_EQ(reduced_empty.reduced_numel, 0);
  EXPECT_EQ(reduced_empty.kept_numel, 6);
  EXPECT_EQ(reduced_empty.slices, 1);
  const ReducePlan kept_empty = plan_reduction(contiguous_problem({0, 5}, {1}));
  EXPECT_EQ(kept_empty.kept_numel, 0);
}

TEST(CudaReducePlan, SecondOutputStridesFollowTheKeptDims) {
  ReduceProblem problem = contiguous_problem({6, 10}, {1});
  problem.out1_strides = {2, 1};
  const ReducePlan plan = plan_reduction(problem);
  ASSERT_EQ(plan.kept.size(), 1u);
  EXPECT_EQ(plan.kept[0].strides[1], 1);
  EXPECT_EQ(plan.kept[0].strides[2], 2);
}

// An empty reduction ([3, 0, 2] over dim 1) still launches (it writes the identity), so its
// size-0 reduced dim must get a usable walker: FastDivmod(0) divided by zero on the host.
TEST(CudaReducePlan, OffsetCalculatorOfAnEmptyGroupDoesNotDivideByZero) {
  const ReducePlan plan = plan_reduction(contiguous_problem({3, 0, 2}, {1}));
  ASSERT_EQ(plan.reduced.size(), 1u);
  EXPECT_EQ(plan.reduced[0].size, 0);
  const OffsetCalculator<1> reduced = offset_calculator_of<1>(plan.reduced, 0);
  EXPECT_EQ(reduced.ndim, 1);
  EXPECT_EQ(offset_calculator_of<3>(plan.kept, 0).get(5)[1], 5);  // output [3, 1, 2]: contiguous
  // Softmax rows of a [0, 5] tensor along dim 1: one size-0 group of rows, two of them.
  const ReduceDims rows = {ReduceDim{0, {5, 5, 0}}, ReduceDim{4, {1, 1, 0}}};
  EXPECT_EQ(offset_calculator_of<3>(rows, 0).ndim, 2);
}

TEST(CudaReducePlan, OffsetCalculatorOfWalksTheGroupInnermostFirst) {
  // kept dims [4, 6] with input strides (1, 4) and output strides (6, 1).
  const ReduceDims group = {ReduceDim{4, {1, 6, 0}}, ReduceDim{6, {4, 1, 0}}};
  const OffsetCalculator<3> calc = offset_calculator_of<3>(group, 0);
  for (uint32_t i = 0; i < 24; ++i) {
    const auto offsets = calc.get(i);
    EXPECT_EQ(offsets[0], (i / 6) * 1 + (i % 6) * 4);
    EXPECT_EQ(offsets[1], (i / 6) * 6 + (i % 6) * 1);
  }
  // One dim longer than 2^31 needs no division, so it is allowed.
  EXPECT_EQ(offset_calculator_of<1>({ReduceDim{int64_t{3} << 31, {1, 0, 0}}}, 0).ndim, 1);
}

}  // namespace
}  // namespace kiln::cuda
