// einsum's contraction planner (einsum_plan.h): shapes and labels in, the dims to sum,
// the permutations and the shapes of every bmm out. Plain arithmetic on shapes: the ops
// run in einsum.cpp.
#include "core/ops/einsum_plan.h"

#include <algorithm>
#include <functional>
#include <map>

namespace kiln::einsum_detail {
namespace {

// A shape with one label per dim, as an operand or an intermediate result has it.
struct LabeledShape {
  std::vector<int64_t> sizes;
  std::string labels;
};

int64_t size_of(const LabeledShape& x, char c) { return x.sizes[x.labels.find(c)]; }

bool contains(const std::string& labels, char c) { return labels.find(c) != std::string::npos; }

// The dims of `x` whose label keep() rejects; `x` loses them.
std::vector<int64_t> sum_out(LabeledShape& x, const std::function<bool(char)>& keep) {
  std::vector<int64_t> dims;
  LabeledShape kept;
  for (size_t d = 0; d < x.labels.size(); ++d) {
    if (keep(x.labels[d])) {
      kept.labels.push_back(x.labels[d]);
      kept.sizes.push_back(x.sizes[d]);
    } else {
      dims.push_back(static_cast<int64_t>(d));
    }
  }
  x = kept;
  return dims;
}

// The permutation that puts x's dims into the order of `order` (a permutation of x.labels).
std::vector<int64_t> permutation_to(const LabeledShape& x, const std::string& order) {
  std::vector<int64_t> perm;
  for (char c : order) perm.push_back(static_cast<int64_t>(x.labels.find(c)));
  return perm;
}

// Plans a x b (step 2 of einsum_plan.h) and makes `a` the product's labeled shape.
ContractionStep contract(LabeledShape& a, const LabeledShape& b, const std::string& needed_later,
                         const std::string& equation) {
  ContractionStep step;
  for (char c : a.labels) {
    if (!contains(b.labels, c))
      step.a_only.push_back(c);
    else if (contains(needed_later, c))
      step.batch.push_back(c);
    else
      step.contracted.push_back(c);
  }
  for (char c : b.labels)
    if (!contains(a.labels, c)) step.b_only.push_back(c);
  // Shared dims must agree or broadcast from 1.
  std::map<char, int64_t> shared_size;
  for (char c : step.batch + step.contracted) {
    const int64_t sa = size_of(a, c), sb = size_of(b, c);
    KILN_CHECK(sa == sb || sa == 1 || sb == 1, "einsum: subscript '", std::string(1, c), "' has size ", sa,
               " in one operand and ", sb, " in another in '", equation, "'");
    shared_size[c] = std::max(sa, sb);
  }
  auto shape_of = [&](const LabeledShape& x, const std::string& order) {
    std::vector<int64_t> s;
    for (char c : order) s.push_back(shared_size.count(c) ? shared_size[c] : size_of(x, c));
    return s;
  };
  auto product = [&](const LabeledShape& x, const std::string& order) {
    int64_t p = 1;
    for (int64_t s : shape_of(x, order)) p *= s;
    return p;
  };
  const std::string a_order = step.batch + step.a_only + step.contracted;
  const std::string b_order = step.batch + step.contracted + step.b_only;
  step.a_permutation = permutation_to(a, a_order);
  step.b_permutation = permutation_to(b, b_order);
  step.a_expanded = shape_of(a, a_order);
  step.b_expanded = shape_of(b, b_order);
  step.a_matrices = {product(a, step.batch), product(a, step.a_only), product(a, step.contracted)};
  step.b_matrices = {product(b, step.batch), product(b, step.contracted), product(b, step.b_only)};
  step.product_shape = shape_of(a, step.batch);
  for (int64_t s : shape_of(a, step.a_only)) step.product_shape.push_back(s);
  for (int64_t s : shape_of(b, step.b_only)) step.product_shape.push_back(s);
  a = {step.product_shape, step.batch + step.a_only + step.b_only};
  return step;
}

}  // namespace

EinsumPlan plan_einsum(const EinsumLabels& labels, const std::vector<std::vector<int64_t>>& shapes,
                       const std::string& equation) {
  KILN_ASSERT(labels.inputs.size() == shapes.size() && !shapes.empty(),
              "einsum: one shape per labelled operand");
  std::vector<LabeledShape> inputs;
  for (size_t i = 0; i < shapes.size(); ++i) inputs.push_back({shapes[i], labels.inputs[i]});
  const std::string& output = labels.output;
  EinsumPlan plan;
  // Step 1: a label stays while the output or another operand (as reduced so far) has it.
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::string needed = output;
    for (size_t j = 0; j < inputs.size(); ++j)
      if (j != i) needed += inputs[j].labels;
    plan.operand_sums.push_back(sum_out(inputs[i], [&](char c) { return contains(needed, c); }));
  }
  // Step 2: contracting with operand i, a shared label is batch while the output or an
  // operand after i still needs it.
  LabeledShape result = inputs[0];
  for (size_t i = 1; i < inputs.size(); ++i) {
    std::string needed_later = output;
    for (size_t j = i + 1; j < inputs.size(); ++j) needed_later += inputs[j].labels;
    plan.contractions.push_back(contract(result, inputs[i], needed_later, equation));
  }
  // Step 3.
  plan.result_sums = sum_out(result, [&](char c) { return contains(output, c); });
  plan.output_permutation = permutation_to(result, output);
  return plan;
}

}  // namespace kiln::einsum_detail
