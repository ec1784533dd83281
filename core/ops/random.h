// Random tensors and dropout, from a device's Philox generator (Note [Philox streams] in
// core/generator.h): the same seed gives the same numbers on every device.
#pragma once

#include <vector>

#include "core/generator.h"
#include "core/tensor.h"

namespace kiln {

// Uniform on [0, 1).
Tensor rand(const std::vector<int64_t>& sizes, TensorOptions options = {}, Generator* generator = nullptr);
// Standard normal.
Tensor randn(const std::vector<int64_t>& sizes, TensorOptions options = {}, Generator* generator = nullptr);
// Integers uniform in [low, high); int64 by default.
Tensor randint(int64_t low, int64_t high, const std::vector<int64_t>& sizes, TensorOptions options = {},
               Generator* generator = nullptr);
// A random permutation of 0..n-1; int64 by default.
Tensor randperm(int64_t n, TensorOptions options = {}, Generator* generator = nullptr);
Tensor rand_like(const Tensor& like, Generator* generator = nullptr);
Tensor randn_like(const Tensor& like, Generator* generator = nullptr);
// 1 with probability p, else 0, in the dtype/device of options.
Tensor bernoulli(const std::vector<int64_t>& sizes, double p, TensorOptions options = {},
                 Generator* generator = nullptr);

// Inverted dropout: in training, zeroes each element with probability p and scales the
// rest by 1 / (1 - p); identity when !training or p == 0. Differentiable (through mul).
Tensor dropout(const Tensor& x, double p = 0.5, bool training = true, Generator* generator = nullptr);

}  // namespace kiln
