// nn::init: in-place initialisers with PyTorch's formulas (torch.nn.init).
//
// Each runs under NoGradGuard (a parameter that requires grad may be filled), draws from
// `generator` (the tensor's device's default generator when null) and returns its tensor.
// Fans follow PyTorch's _calculate_fan_in_and_fan_out for a weight [out, in, k...]:
// receptive field = prod(k...), fan_in = in * receptive, fan_out = out * receptive.
//   kaiming: std = gain / sqrt(fan), gain = calculate_gain(nonlinearity, a)
//   xavier:  std = gain * sqrt(2 / (fan_in + fan_out))
//   uniform variants draw from U(-bound, bound) with bound = sqrt(3) * std.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "core/generator.h"
#include "core/tensor.h"

namespace kiln::nn::init {

enum class FanMode { FanIn, FanOut };

// The recommended gain for a nonlinearity: 1 for linear, conv1d/2d/3d, sigmoid (and the
// transposed convs); 5/3 tanh; sqrt(2) relu; sqrt(2 / (1 + slope^2)) leaky_relu (slope
// `param`, default 0.01); 3/4 selu. Unknown names are errors.
double calculate_gain(const std::string& nonlinearity, std::optional<double> param = std::nullopt);
// (fan_in, fan_out) of a tensor of at least 2 dims.
std::pair<int64_t, int64_t> calculate_fan_in_and_fan_out(const Tensor& tensor);

Tensor& uniform_(Tensor& tensor, double a = 0.0, double b = 1.0, Generator* generator = nullptr);
Tensor& normal_(Tensor& tensor, double mean = 0.0, double std = 1.0, Generator* generator = nullptr);
Tensor& constant_(Tensor& tensor, double value);
Tensor& zeros_(Tensor& tensor);
Tensor& ones_(Tensor& tensor);

Tensor& kaiming_uniform_(Tensor& tensor, double a = 0.0, FanMode mode = FanMode::FanIn,
                         const std::string& nonlinearity = "leaky_relu", Generator* generator = nullptr);
Tensor& kaiming_normal_(Tensor& tensor, double a = 0.0, FanMode mode = FanMode::FanIn,
                        const std::string& nonlinearity = "leaky_relu", Generator* generator = nullptr);
Tensor& xavier_uniform_(Tensor& tensor, double gain = 1.0, Generator* generator = nullptr);
Tensor& xavier_normal_(Tensor& tensor, double gain = 1.0, Generator* generator = nullptr);

}  // namespace kiln::nn::init
