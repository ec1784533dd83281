// Activation layers: each forward is the functional op with the layer's options.
#include "nn/activation.h"

#include <sstream>

#include "core/ops/activation.h"
#include "core/ops/factory.h"

namespace kiln::nn {
namespace {

std::string number(double value) {
  std::ostringstream os;
  os << value;
  return os.str();
}

}  // namespace

Tensor ReLU::forward(const Tensor& input) { return relu(input); }

Tensor LeakyReLU::forward(const Tensor& input) { return leaky_relu(input, options_.negative_slope); }
std::string LeakyReLU::extra_repr() const { return "negative_slope=" + number(options_.negative_slope); }

PReLU::PReLU(const PReLUOptions& options) : options_(options) {
  KILN_CHECK(options.num_parameters >= 1, "PReLU: num_parameters must be at least 1, got ", options.num_parameters);
  weight = register_parameter("weight", full({options.num_parameters}, options.init, {.dtype = DType::Float32}));
}
Tensor PReLU::forward(const Tensor& input) { return prelu(input, weight); }
std::string PReLU::extra_repr() const { return "num_parameters=" + std::to_string(options_.num_parameters); }

Tensor SiLU::forward(const Tensor& input) { return silu(input); }
Tensor Sigmoid::forward(const Tensor& input) { return sigmoid(input); }
Tensor Tanh::forward(const Tensor& input) { return tanh(input); }

GELU::GELU(const GELUOptions& options) : options_(options) {
  KILN_CHECK(options.approximate == "none" || options.approximate == "tanh",
             "GELU: approximate must be \"none\" or \"tanh\", got \"", options.approximate, "\"");
}
Tensor GELU::forward(const Tensor& input) { return gelu(input, options_.approximate); }

Tensor ELU::forward(const Tensor& input) { return elu(input, options_.alpha); }
std::string ELU::extra_repr() const { return "alpha=" + number(options_.alpha); }

}  // namespace kiln::nn
