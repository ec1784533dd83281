// gradcheck: autograd's gradients against central differences in float64.
//
// For f = fn(inputs) and a fixed random vector v shaped like f, compares the analytic
// d(v . f)/dx (one backward pass) with the numeric (v . f(x + eps e_i) - v . f(x - eps e_i))
// / 2 eps for every element i of every input that requires grad. Inputs may be
// non-contiguous leaves; elements are perturbed in place in their storage.
//
// Every differentiable public op must have a case: write it as KILN_GRADCHECK_TEST(op),
// which registers the op's name; tests/core/test_gradcheck_coverage.cpp fails for any op
// declared in core/ops/*.h that has no case and is not listed there as non-differentiable.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <set>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace kiln::testing {

using GradcheckFn = std::function<Tensor(const std::vector<Tensor>&)>;

struct GradcheckOptions {
  double eps = 1e-6;
  double atol = 1e-7;
  double rtol = 1e-5;
};

::testing::AssertionResult gradcheck(const GradcheckFn& fn, const std::vector<Tensor>& inputs,
                                     GradcheckOptions options = {});

std::set<std::string>& gradchecked_ops();
bool register_gradchecked(const char* op);

}  // namespace kiln::testing

#define KILN_GRADCHECK_TEST(op)                                                            \
  [[maybe_unused]] static const bool kiln_gradcheck_registered_##op =                      \
      ::kiln::testing::register_gradchecked(#op);                                          \
  TEST(Gradcheck, op)
