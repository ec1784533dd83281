// Linear: parameters, PyTorch's default initialisation and forward through kiln::linear.
#include "nn/linear.h"

#include <cmath>

#include "core/ops/factory.h"
#include "core/ops/matmul.h"
#include "nn/init.h"

namespace kiln::nn {

Linear::Linear(const LinearOptions& options) : options_(options) {
  KILN_CHECK(options.in_features > 0 && options.out_features > 0, "Linear: in_features and out_features must be ",
             "positive, got ", options.in_features, " and ", options.out_features);
  weight = register_parameter("weight", empty({options.out_features, options.in_features}));
  if (options.bias) bias = register_parameter("bias", empty({options.out_features}));
  reset_parameters();
}

// Note [Default layer initialisation]: PyTorch's Linear and ConvNd draw the weight with
// kaiming_uniform_(a = sqrt(5)) (bound sqrt(6 / ((1 + 5) fan_in)) = 1 / sqrt(fan_in)) and
// the bias from U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
void Linear::reset_parameters(Generator* generator) {
  init::kaiming_uniform_(weight, std::sqrt(5.0), init::FanMode::FanIn, "leaky_relu", generator);
  if (bias.defined()) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(init::calculate_fan_in_and_fan_out(weight).first));
    init::uniform_(bias, -bound, bound, generator);
  }
}

Tensor Linear::forward(const Tensor& input) {
  KILN_CHECK(input.defined() && input.dim() >= 1 && input.size(-1) == options_.in_features, "Linear: expected ",
             "an input with last dim ", options_.in_features, ", got shape ",
             sizes_or_none(input));
  return linear(input, weight, bias);
}

std::string Linear::extra_repr() const {
  return "in_features=" + std::to_string(options_.in_features) + ", out_features=" +
         std::to_string(options_.out_features) + ", bias=" + (options_.bias ? "True" : "False");
}

}  // namespace kiln::nn
