// einsum (einsum.h): parse the equation (einsum_parse.h), plan the contraction from the
// shapes (einsum_plan.h), and run the plan with sums, permutes, expands, reshapes and
// bmm, so the gradient comes from those ops (STYLE 3).
//
// Under autocast einsum is a lower-precision op (core/autocast.h): the operands are cast
// once at the entry and the body runs with autocast off, so its inner sums stay in the
// autocast dtype instead of bouncing through float32 on their way to bmm.
#include "core/ops/einsum.h"

#include "core/autocast.h"
#include "core/ops/einsum_parse.h"
#include "core/ops/einsum_plan.h"
#include "core/ops/matmul.h"
#include "core/ops/reduce.h"

namespace kiln {
namespace {

using einsum_detail::ContractionStep;
using einsum_detail::EinsumPlan;

// x summed over `dims`; x itself when there are none (sum over no dims would sum all).
Tensor sum_dims(const Tensor& x, const std::vector<int64_t>& dims) { return dims.empty() ? x : sum(x, dims); }

// One bmm of the plan: the result so far times the next operand.
Tensor contract(const Tensor& a, const Tensor& b, const ContractionStep& step) {
  const Tensor a3 = a.permute(step.a_permutation).expand(step.a_expanded).reshape(step.a_matrices);
  const Tensor b3 = b.permute(step.b_permutation).expand(step.b_expanded).reshape(step.b_matrices);
  return bmm(a3, b3).reshape(step.product_shape);
}

}  // namespace

Tensor einsum(const std::string& equation, const std::vector<Tensor>& operands) {
  if (autocast_enabled()) {
    std::vector<Tensor> cast;
    for (const Tensor& t : operands) cast.push_back(autocast_input(t, AutocastPolicy::LowerPrecision));
    const AutocastGuard off(autocast_state().dtype, /*enabled=*/false);
    return einsum(equation, cast);
  }
  const einsum_detail::EinsumLabels labels = einsum_detail::parse_einsum(equation, operands);
  std::vector<std::vector<int64_t>> shapes;
  for (const Tensor& t : operands) shapes.push_back(t.sizes());
  const EinsumPlan plan = einsum_detail::plan_einsum(labels, shapes, equation);
  std::vector<Tensor> reduced;
  for (size_t i = 0; i < operands.size(); ++i) reduced.push_back(sum_dims(operands[i], plan.operand_sums[i]));
  Tensor result = reduced[0];
  for (size_t k = 0; k < plan.contractions.size(); ++k)
    result = contract(result, reduced[k + 1], plan.contractions[k]);
  return sum_dims(result, plan.result_sums).permute(plan.output_permutation);
}

}  // namespace kiln
