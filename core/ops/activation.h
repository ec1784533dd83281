// Activation functions. Each is one functor of the elementwise engine forward and one
// fused backward functor (Backend BinaryOp::*Backward), so backward is a single pass.
#pragma once

#include <string>

#include "core/tensor.h"

namespace kiln {

Tensor relu(const Tensor& x);  // subgradient 0 at 0; saves its output
Tensor leaky_relu(const Tensor& x, double negative_slope = 0.01);
// x for x > 0, weight * x otherwise; weight has 1 or C = x.size(1) elements.
Tensor prelu(const Tensor& x, const Tensor& weight);
Tensor sigmoid(const Tensor& x);  // saves its output
Tensor tanh(const Tensor& x);     // saves its output
Tensor silu(const Tensor& x);     // x * sigmoid(x), a.k.a. swish
// approximate: "none" (exact, erf) or "tanh".
Tensor gelu(const Tensor& x, const std::string& approximate = "none");
Tensor elu(const Tensor& x, double alpha = 1.0);
// log(1 + exp(beta x)) / beta; linear where beta x > threshold.
Tensor softplus(const Tensor& x, double beta = 1.0, double threshold = 20.0);

}  // namespace kiln
