// The second step of einsum (einsum.h): planning the contraction from the labels
// (einsum_parse.h) and the operands' shapes alone, before any tensor is touched.
// Internal to core/ops.
//
//   1. Each operand sums out the labels that no other operand and not the output uses.
//   2. Operands are contracted left to right, the result so far (A) with the next operand
//      (B): the labels both share and a later step (a later operand or the output) still
//      needs are batch dims, the other shared ones are contracted, the rest are A-only
//      or B-only. A is permuted to [batch, A-only, contracted] and B to [batch,
//      contracted, B-only]; a shared dim of size 1 on one side is expanded to the other's
//      size (broadcast); both are reshaped to 3-d, [Batch, M, K] and [Batch, K, N], and
//      multiplied with one bmm, whose product is reshaped back to [batch..., A-only...,
//      B-only...].
//   3. The result sums out what the output does not keep and is permuted into its order.
// A shared dim whose sizes differ and are not 1 is a kiln::Error naming the equation.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/ops/einsum_parse.h"

namespace kiln::einsum_detail {

// One bmm of step 2 (A is the result so far, B the next operand).
struct ContractionStep {
  std::string batch, contracted, a_only, b_only;  // labels, in A's then B's order
  // To [batch, A-only, contracted] and [batch, contracted, B-only].
  std::vector<int64_t> a_permutation, b_permutation;
  std::vector<int64_t> a_expanded, b_expanded;  // the permuted shapes with size-1 shared dims broadcast
  std::vector<int64_t> a_matrices, b_matrices;  // [Batch, M, K] and [Batch, K, N]
  std::vector<int64_t> product_shape;           // [batch..., A-only..., B-only...]
};

struct EinsumPlan {
  std::vector<std::vector<int64_t>> operand_sums;  // step 1: the dims operand i sums out (may be none)
  std::vector<ContractionStep> contractions;       // step 2: contractions[k] brings in operand k + 1
  std::vector<int64_t> result_sums;                // step 3: the dims of the last result summed out
  std::vector<int64_t> output_permutation;         // then the permutation into the output's order
};

// The plan for operands of `shapes` labelled by `labels`; `equation` is for the messages.
EinsumPlan plan_einsum(const EinsumLabels& labels, const std::vector<std::vector<int64_t>>& shapes,
                       const std::string& equation);

}  // namespace kiln::einsum_detail
