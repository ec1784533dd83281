// The model tests' side of tests/nn/models/make_fixtures.py: the formula weights both sides
// compute, and the comparison of a model's output, input gradient and parameter gradients
// with a fixture PyTorch wrote (see make_fixtures.py for the formula and the files).
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "core/tensor.h"
#include "nn/layer.h"

namespace kiln::testing {

// make_fixtures.py's fill_formula: for the k-th parameter, element i, u = sqrt(3) (2
// integer_hash(i, k) - 1); sqrt(2 / fan_in) u for >= 2-d tensors, 1 + 0.1 u for norm
// weights, 0.1 u for biases.
void fill_formula_weights(nn::Module& model);

// ||actual - expected|| / ||expected|| (both converted to float64 on the CPU).
double relative_error(const Tensor& actual, const Tensor& expected);

// Loads tests/nn/models/<file>, runs `model` (in the fixture's mode, in `dtype`, formula
// weights) on its input, and checks the output, the input gradient, every parameter's
// gradient norm and sum, and the full gradients and buffers the fixture holds, each to a
// relative error of at most `tolerance` (gradients in float32: at least 2e-2, where a
// single ReLU mask flipped by rounding moves a sum; see the .cpp).
void expect_matches_fixture(nn::Layer& model, const std::string& file, DType dtype, double tolerance);

// One training step's input gradient, parameter gradients and state (buffers included),
// for comparing two modes of a model: formula weights, train mode, the default generators
// seeded with 3 (dropout masks), backward from sum(model(x) * w).
struct TrainStep {
  Tensor input_grad;
  nn::NamedTensors grads, state;
};
TrainStep train_step(nn::Layer& model, const Tensor& x, const Tensor& w);

// Two steps' gradients and state are bit for bit the same.
void expect_same_step(const TrainStep& a, const TrainStep& b);

}  // namespace kiln::testing
