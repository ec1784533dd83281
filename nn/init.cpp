// nn::init: the formulas of init.h over kiln::rand / randn and copy_ under NoGradGuard.
#include "nn/init.h"

#include <cmath>

#include "core/autograd/grad_mode.h"
#include "core/ops/elementwise.h"
#include "core/ops/random.h"

namespace kiln::nn::init {
namespace {

void check_floating(const Tensor& tensor, const char* op) {
  KILN_CHECK(tensor.defined(), "nn::init::", op, ": undefined tensor");
  KILN_CHECK(tensor.is_floating_point(), "nn::init::", op, ": expected a floating-point tensor, got ",
             tensor.dtype());
}

// Draws in float64 and converts once, so low-precision tensors get correctly rounded values.
TensorOptions draw_options(const Tensor& tensor) { return {.dtype = DType::Float64, .device = tensor.device()}; }

double fan_of(const Tensor& tensor, FanMode mode) {
  const auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(tensor);
  return static_cast<double>(mode == FanMode::FanIn ? fan_in : fan_out);
}

double kaiming_std(const Tensor& tensor, double a, FanMode mode, const std::string& nonlinearity, const char* op) {
  const double fan = fan_of(tensor, mode);
  KILN_CHECK(fan > 0, "nn::init::", op, ": the fan of a tensor of shape ", tensor.sizes(), " is 0");
  return calculate_gain(nonlinearity, a) / std::sqrt(fan);
}

double xavier_std(const Tensor& tensor, double gain) {
  const auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(tensor);
  return gain * std::sqrt(2.0 / static_cast<double>(fan_in + fan_out));
}

}  // namespace

double calculate_gain(const std::string& nonlinearity, std::optional<double> param) {
  if (nonlinearity == "linear" || nonlinearity == "identity" || nonlinearity == "sigmoid" ||
      nonlinearity.rfind("conv", 0) == 0) {
    return 1.0;
  }
  if (nonlinearity == "tanh") return 5.0 / 3.0;
  if (nonlinearity == "relu") return std::sqrt(2.0);
  if (nonlinearity == "selu") return 3.0 / 4.0;
  KILN_CHECK(nonlinearity == "leaky_relu", "nn::init::calculate_gain: unsupported nonlinearity \"",
             nonlinearity, "\" (expected linear, conv1d/2d/3d, sigmoid, tanh, relu, leaky_relu or selu)");
  const double slope = param.value_or(0.01);
  return std::sqrt(2.0 / (1.0 + slope * slope));
}

std::pair<int64_t, int64_t> calculate_fan_in_and_fan_out(const Tensor& tensor) {
  KILN_CHECK(tensor.defined() && tensor.dim() >= 2,
             "nn::init: fan in and fan out need a tensor with at least 2 dims, got shape ",
             sizes_or_none(tensor));
  int64_t receptive_field = 1;
  for (int64_t d = 2; d < tensor.dim(); ++d) receptive_field *= tensor.size(d);
  return {tensor.size(1) * receptive_field, tensor.size(0) * receptive_field};
}

Tensor& uniform_(Tensor& tensor, double a, double b, Generator* generator) {
  check_floating(tensor, "uniform_");
  KILN_CHECK(a <= b, "nn::init::uniform_: expected a <= b, got a = ", a, ", b = ", b);
  NoGradGuard no_grad;
  tensor.copy_(add(mul(rand(tensor.sizes(), draw_options(tensor), generator), b - a), a));
  return tensor;
}

Tensor& normal_(Tensor& tensor, double mean, double std, Generator* generator) {
  check_floating(tensor, "normal_");
  KILN_CHECK(std >= 0, "nn::init::normal_: std must be non-negative, got ", std);
  NoGradGuard no_grad;
  tensor.copy_(add(mul(randn(tensor.sizes(), draw_options(tensor), generator), std), mean));
  return tensor;
}

Tensor& constant_(Tensor& tensor, double value) {
  check_floating(tensor, "constant_");
  NoGradGuard no_grad;
  tensor.fill_(value);
  return tensor;
}

Tensor& zeros_(Tensor& tensor) { return constant_(tensor, 0.0); }
Tensor& ones_(Tensor& tensor) { return constant_(tensor, 1.0); }

Tensor& kaiming_uniform_(Tensor& tensor, double a, FanMode mode, const std::string& nonlinearity,
                         Generator* generator) {
  check_floating(tensor, "kaiming_uniform_");
  const double bound = std::sqrt(3.0) * kaiming_std(tensor, a, mode, nonlinearity, "kaiming_uniform_");
  return uniform_(tensor, -bound, bound, generator);
}

Tensor& kaiming_normal_(Tensor& tensor, double a, FanMode mode, const std::string& nonlinearity,
                        Generator* generator) {
  check_floating(tensor, "kaiming_normal_");
  return normal_(tensor, 0.0, kaiming_std(tensor, a, mode, nonlinearity, "kaiming_normal_"), generator);
}

Tensor& xavier_uniform_(Tensor& tensor, double gain, Generator* generator) {
  check_floating(tensor, "xavier_uniform_");
  const double bound = std::sqrt(3.0) * xavier_std(tensor, gain);
  return uniform_(tensor, -bound, bound, generator);
}

Tensor& xavier_normal_(Tensor& tensor, double gain, Generator* generator) {
  check_floating(tensor, "xavier_normal_");
  return normal_(tensor, 0.0, xavier_std(tensor, gain), generator);
}

}  // namespace kiln::nn::init
