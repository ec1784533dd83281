// einsum's contraction planner (core/ops/einsum_plan.h) on its own, from labels and
// shapes: which dims are summed first, which are batch, contracted or kept in each bmm,
// the permutations and the 3-d shapes each operand is reshaped to, the broadcast of
// size-1 dims, the final sum and permutation, and the size-mismatch error.
#include <gtest/gtest.h>

#include "core/ops/einsum_plan.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

using einsum_detail::ContractionStep;
using einsum_detail::EinsumLabels;
using einsum_detail::EinsumPlan;
using einsum_detail::plan_einsum;
using Dims = std::vector<int64_t>;

void expect_step(const ContractionStep& s, const std::string& batch, const std::string& contracted,
                 const std::string& a_only, const std::string& b_only) {
  EXPECT_EQ(s.batch, batch);
  EXPECT_EQ(s.contracted, contracted);
  EXPECT_EQ(s.a_only, a_only);
  EXPECT_EQ(s.b_only, b_only);
}

TEST(EinsumPlan, MatrixProductIsOneBmmOfABatchOfOne) {
  const EinsumPlan plan = plan_einsum(EinsumLabels{{"ij", "jk"}, "ik"}, {{3, 4}, {4, 5}}, "ij,jk->ik");
  EXPECT_EQ(plan.operand_sums, (std::vector<Dims>{{}, {}}));
  ASSERT_EQ(plan.contractions.size(), 1u);
  const ContractionStep& s = plan.contractions[0];
  expect_step(s, "", "j", "i", "k");
  EXPECT_EQ(s.a_permutation, (Dims{0, 1}));
  EXPECT_EQ(s.b_permutation, (Dims{0, 1}));
  EXPECT_EQ(s.a_matrices, (Dims{1, 3, 4}));
  EXPECT_EQ(s.b_matrices, (Dims{1, 4, 5}));
  EXPECT_EQ(s.product_shape, (Dims{3, 5}));
  EXPECT_EQ(plan.result_sums, Dims{});
  EXPECT_EQ(plan.output_permutation, (Dims{0, 1}));
}

TEST(EinsumPlan, AttentionScoresPermuteTheKeysAndBatchOverBatchAndHeads) {
  const EinsumPlan plan =
      plan_einsum(EinsumLabels{{"bhqd", "bhkd"}, "bhqk"}, {{2, 3, 4, 5}, {2, 3, 6, 5}}, "bhqd,bhkd->bhqk");
  ASSERT_EQ(plan.contractions.size(), 1u);
  const ContractionStep& s = plan.contractions[0];
  expect_step(s, "bh", "d", "q", "k");
  EXPECT_EQ(s.a_permutation, (Dims{0, 1, 2, 3}));
  EXPECT_EQ(s.b_permutation, (Dims{0, 1, 3, 2}));  // [b, h, k, d] -> [b, h, d, k]
  EXPECT_EQ(s.a_matrices, (Dims{6, 4, 5}));
  EXPECT_EQ(s.b_matrices, (Dims{6, 5, 6}));
  EXPECT_EQ(s.product_shape, (Dims{2, 3, 4, 6}));
  EXPECT_EQ(plan.output_permutation, (Dims{0, 1, 2, 3}));
}

TEST(EinsumPlan, LabelsNoOneElseUsesAreSummedFirst) {
  const EinsumPlan plan = plan_einsum(EinsumLabels{{"ij", "jk"}, "k"}, {{3, 4}, {4, 5}}, "ij,jk->k");
  EXPECT_EQ(plan.operand_sums, (std::vector<Dims>{{0}, {}}));
  ASSERT_EQ(plan.contractions.size(), 1u);
  expect_step(plan.contractions[0], "", "j", "", "k");
  EXPECT_EQ(plan.contractions[0].a_matrices, (Dims{1, 1, 4}));
}

TEST(EinsumPlan, SizeOneSharedDimsBroadcast) {
  const EinsumPlan plan =
      plan_einsum(EinsumLabels{{"bij", "bjk"}, "bik"}, {{1, 3, 4}, {2, 4, 5}}, "bij,bjk->bik");
  const ContractionStep& s = plan.contractions.at(0);
  EXPECT_EQ(s.a_expanded, (Dims{2, 3, 4}));
  EXPECT_EQ(s.b_expanded, (Dims{2, 4, 5}));
  EXPECT_EQ(s.a_matrices, (Dims{2, 3, 4}));
  EXPECT_EQ(s.product_shape, (Dims{2, 3, 5}));
}

// j is shared by the first two operands but the third still needs it: it stays a batch
// dim of the first bmm and is contracted by the second.
TEST(EinsumPlan, ALabelALaterOperandNeedsStaysABatchDim) {
  const EinsumPlan plan = plan_einsum(EinsumLabels{{"ij", "j", "j"}, "i"}, {{3, 4}, {4}, {4}}, "ij,j,j->i");
  ASSERT_EQ(plan.contractions.size(), 2u);
  const ContractionStep& first = plan.contractions[0];
  expect_step(first, "j", "", "i", "");
  EXPECT_EQ(first.a_permutation, (Dims{1, 0}));
  EXPECT_EQ(first.a_matrices, (Dims{4, 3, 1}));
  EXPECT_EQ(first.b_matrices, (Dims{4, 1, 1}));
  EXPECT_EQ(first.product_shape, (Dims{4, 3}));  // labels "ji"
  const ContractionStep& second = plan.contractions[1];
  expect_step(second, "", "j", "i", "");
  EXPECT_EQ(second.a_permutation, (Dims{1, 0}));
  EXPECT_EQ(second.a_matrices, (Dims{1, 3, 4}));
  EXPECT_EQ(second.product_shape, (Dims{3}));
}

TEST(EinsumPlan, OneOperandIsOnlySumsAndAPermutation) {
  const EinsumPlan transpose = plan_einsum(EinsumLabels{{"ij"}, "ji"}, {{3, 4}}, "ij->ji");
  EXPECT_TRUE(transpose.contractions.empty());
  EXPECT_EQ(transpose.operand_sums, (std::vector<Dims>{{}}));
  EXPECT_EQ(transpose.output_permutation, (Dims{1, 0}));
  const EinsumPlan total = plan_einsum(EinsumLabels{{"ij"}, ""}, {{3, 4}}, "ij->");
  EXPECT_EQ(total.operand_sums, (std::vector<Dims>{{0, 1}}));
  EXPECT_EQ(total.output_permutation, Dims{});
}

TEST(EinsumPlan, ChainsContractLeftToRight) {
  const EinsumPlan plan =
      plan_einsum(EinsumLabels{{"ij", "jk", "kl"}, "il"}, {{3, 4}, {4, 5}, {5, 2}}, "ij,jk,kl->il");
  ASSERT_EQ(plan.contractions.size(), 2u);
  expect_step(plan.contractions[0], "", "j", "i", "k");
  expect_step(plan.contractions[1], "", "k", "i", "l");
  EXPECT_EQ(plan.contractions[1].product_shape, (Dims{3, 2}));
}

TEST(EinsumPlan, SharedDimsOfDifferentSizesAreAnErrorNamingTheEquation) {
  EXPECT_KILN_ERROR(plan_einsum(EinsumLabels{{"ij", "jk"}, "ik"}, {{3, 4}, {5, 2}}, "ij,jk->ik"),
                    "einsum: subscript 'j' has size 4 in one operand and 5 in another in 'ij,jk->ik'");
}

}  // namespace
}  // namespace kiln
