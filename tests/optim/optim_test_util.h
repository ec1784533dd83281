// Helpers of the optimizer tests: parameters with known values, gradients drawn per step,
// a float64 reference that mirrors PyTorch's documented algorithms with scalar loops, and
// a driver that runs an optimizer and its reference side by side.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/ops.h"
#include "optim/optim.h"
#include "tests/test_util.h"

namespace kiln::testing {

// One parameter of the reference: its values and its state vectors, in float64.
struct RefParam {
  std::vector<double> value;
  std::map<std::string, std::vector<double>> state;
  int64_t step = 0;
};
// One update of a reference parameter with gradient `grad`, at learning rate `lr`.
using RefUpdate = std::function<void(RefParam& param, const std::vector<double>& grad, double lr)>;

// PyTorch's single-tensor algorithms (torch/optim/{sgd,adam,rmsprop}.py), element by element.
RefUpdate sgd_reference(const optim::SGDOptions& o);
RefUpdate adam_reference(const optim::AdamOptions& o, bool decoupled_weight_decay);
RefUpdate rmsprop_reference(const optim::RMSpropOptions& o);

// Leaf parameters of a few shapes, values uniform in +-[0.5, 1.5], requiring grad.
std::vector<Tensor> make_params(DType dtype, uint64_t seed = 7);
// Copies of `params` (same values and dtype), new leaves requiring grad.
std::vector<Tensor> clone_params(const std::vector<Tensor>& params);
// A gradient for params[index] at step `step` (values +-[0.5, 1.5]), in its dtype.
Tensor step_grad(const Tensor& param, int64_t index, int64_t step);
// Sets every parameter's gradient to step_grad(...).
void set_step_grads(const std::vector<Tensor>& params, int64_t step);

// Runs `steps` steps of `optimizer` on `params` and of `reference` on their float64
// copies (with the same gradients, rounded to the parameters' dtype), and checks the
// parameters after each step within `tol`.
void expect_matches_reference(optim::Optimizer& optimizer, const std::vector<Tensor>& params,
                              const RefUpdate& reference, int steps, Tolerance tol);
// The tolerance of an optimizer test in `dtype` (looser than one op's: errors add up).
Tolerance optim_tolerance(DType dtype);

}  // namespace kiln::testing
