// flip_averaged_probabilities (flip_tta.h): for each subset of the axes (a bit mask), flip
// the input, predict, softmax, flip back, and add; divide by the number of subsets.
#include "train/flip_tta.h"

#include <set>

#include "core/autograd/grad_mode.h"
#include "core/error.h"
#include "core/ops/elementwise.h"
#include "core/ops/softmax.h"
#include "data/transform_util.h"

namespace kiln::train {
namespace {

Tensor flipped(Tensor t, const std::vector<int64_t>& dims, uint32_t mask) {
  for (size_t i = 0; i < dims.size(); ++i) {
    if (mask & (1U << i)) t = data::flip(t, dims[i]);
  }
  return t;
}

}  // namespace

Tensor flip_averaged_probabilities(const Tensor& inputs,
                                   const std::function<Tensor(const Tensor&)>& logits_of,
                                   const std::vector<int64_t>& axes) {
  const char* op = "flip_averaged_probabilities";
  KILN_CHECK(inputs.defined() && inputs.dim() >= 3, op, ": inputs must be [B, C, d...], got ",
             inputs.defined() ? inputs.sizes() : Dims{});
  KILN_CHECK(static_cast<bool>(logits_of), op, ": no predictor");
  std::vector<int64_t> dims;
  for (int64_t axis : axes) {
    KILN_CHECK(axis >= 0 && axis < inputs.dim() - 2, op, ": axis ", axis, " is not a spatial axis of ",
               inputs.sizes());
    dims.push_back(axis + 2);
  }
  KILN_CHECK(std::set<int64_t>(dims.begin(), dims.end()).size() == dims.size() && dims.size() <= 16, op,
             ": each axis at most once, got ", axes);
  NoGradGuard no_grad;
  Tensor sum;
  const uint32_t subsets = 1U << dims.size();
  for (uint32_t mask = 0; mask < subsets; ++mask) {
    const Tensor logits = logits_of(flipped(inputs, dims, mask));
    KILN_CHECK(logits.defined() && logits.dim() == inputs.dim(), op,
               ": the predictor must return [B, K, d...], got ", logits.defined() ? logits.sizes() : Dims{});
    const Tensor p = flipped(softmax(logits, 1), dims, mask);
    sum = sum.defined() ? add(sum, p) : p;
  }
  return div(sum, static_cast<double>(subsets));
}

}  // namespace kiln::train
