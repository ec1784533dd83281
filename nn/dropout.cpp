// Dropout and Dropout3d: an elementwise mask (kiln::dropout) or a per-channel mask drawn
// with bernoulli and broadcast over the spatial dims.
#include "nn/dropout.h"

#include <sstream>

#include "core/ops/elementwise.h"
#include "core/ops/random.h"

namespace kiln::nn {
namespace {

void check_probability(double p, const char* layer) {
  KILN_CHECK(p >= 0.0 && p <= 1.0, layer, ": dropout probability must be in [0, 1], got ", p);
}

std::string p_repr(double p) {
  std::ostringstream os;
  os << "p=" << p;
  return os.str();
}

}  // namespace

Dropout::Dropout(const DropoutOptions& options) : options_(options) { check_probability(options.p, "Dropout"); }

Tensor Dropout::forward(const Tensor& input) {
  return dropout(input, options_.p, is_training(), options_.generator);
}

std::string Dropout::extra_repr() const { return p_repr(options_.p); }

Dropout3d::Dropout3d(const DropoutOptions& options) : options_(options) { check_probability(options.p, "Dropout3d"); }

Tensor Dropout3d::forward(const Tensor& input) {
  KILN_CHECK(input.defined() && (input.dim() == 4 || input.dim() == 5), "Dropout3d: expected an input [N, C, D, H, W] "
             "or [C, D, H, W], got shape ", sizes_or_none(input));
  if (!is_training() || options_.p == 0.0) return input;
  if (options_.p == 1.0) return mul(input, 0.0);
  std::vector<int64_t> mask_shape = input.sizes();
  for (int64_t d = input.dim() - 3; d < input.dim(); ++d) mask_shape[static_cast<size_t>(d)] = 1;
  const Tensor keep = bernoulli(mask_shape, 1.0 - options_.p, {.dtype = input.dtype(), .device = input.device()},
                                options_.generator);
  return mul(input, div(keep, 1.0 - options_.p));
}

std::string Dropout3d::extra_repr() const { return p_repr(options_.p); }

}  // namespace kiln::nn
