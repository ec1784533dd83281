// RMSprop against a float64 reference of PyTorch's algorithm, over centered, momentum,
// weight decay and maximize, in float32 and float64 (and float16 loosely); its state and
// option checks.
#include <gtest/gtest.h>

#include "tests/optim/optim_test_util.h"

namespace kiln {
namespace {

using optim::RMSprop;
using optim::RMSpropOptions;
using testing::expect_matches_reference;
using testing::make_params;
using testing::optim_tolerance;

TEST(OptimRMSprop, MatchesReferenceForEveryOptionCombination) {
  for (const DType dtype : {DType::Float32, DType::Float64})
    for (const bool centered : {false, true})
      for (const double momentum : {0.0, 0.5})
        for (const double weight_decay : {0.0, 0.1})
          for (const bool maximize : {false, true}) {
            const RMSpropOptions options{.lr = 0.01,
                                         .alpha = 0.9,
                                         .eps = 1e-6,
                                         .weight_decay = weight_decay,
                                         .momentum = momentum,
                                         .centered = centered,
                                         .maximize = maximize};
            SCOPED_TRACE("centered " + std::to_string(centered) + " momentum " + std::to_string(momentum) +
                         " weight_decay " + std::to_string(weight_decay) + " maximize " + std::to_string(maximize) +
                         " in " + std::string(dtype_name(dtype)));
            const std::vector<Tensor> params = make_params(dtype);
            RMSprop rmsprop(params, options);
            expect_matches_reference(rmsprop, params, testing::rmsprop_reference(options), 4, optim_tolerance(dtype));
          }
}

TEST(OptimRMSprop, Float16ParamsMatchReferenceLoosely) {
  const RMSpropOptions options{.lr = 0.01, .momentum = 0.5, .centered = true};
  const std::vector<Tensor> params = make_params(DType::Float16);
  RMSprop rmsprop(params, options);
  expect_matches_reference(rmsprop, params, testing::rmsprop_reference(options), 3, optim_tolerance(DType::Float16));
}

TEST(OptimRMSprop, StateFollowsTheOptions) {
  const std::vector<Tensor> params = make_params(DType::Float32);
  RMSprop plain(params);
  testing::set_step_grads(params, 0);
  plain.step();
  const optim::ParamState& state = plain.state(params[0]);
  EXPECT_EQ(state.size(), 2u);
  EXPECT_EQ(state.count("square_avg"), 1u);
  EXPECT_EQ(state.at("step").item<double>(), 1.0);

  const std::vector<Tensor> more_params = make_params(DType::Float32);
  RMSprop full(more_params, RMSpropOptions{.momentum = 0.9, .centered = true});
  testing::set_step_grads(more_params, 0);
  full.step();
  const optim::ParamState& full_state = full.state(more_params[0]);
  EXPECT_EQ(full_state.size(), 4u);
  EXPECT_EQ(full_state.count("momentum_buffer"), 1u);
  EXPECT_EQ(full_state.count("grad_avg"), 1u);
  const RMSpropOptions defaults;
  EXPECT_EQ(defaults.lr, 1e-2);
  EXPECT_EQ(defaults.alpha, 0.99);
  EXPECT_EQ(defaults.eps, 1e-8);
}

TEST(OptimRMSprop, BadOptionsAreErrors) {
  const std::vector<Tensor> params = make_params(DType::Float32);
  EXPECT_KILN_ERROR(RMSprop(params, RMSpropOptions{.lr = -1}), "RMSprop", "lr");
  EXPECT_KILN_ERROR(RMSprop(params, RMSpropOptions{.alpha = -0.1}), "RMSprop", "alpha");
  EXPECT_KILN_ERROR(RMSprop(params, RMSpropOptions{.eps = -1}), "RMSprop", "eps");
  EXPECT_KILN_ERROR(RMSprop(params, RMSpropOptions{.momentum = -1}), "RMSprop", "momentum");
  EXPECT_KILN_ERROR(RMSprop(params, RMSpropOptions{.weight_decay = -1}), "RMSprop", "weight_decay");
}

}  // namespace
}  // namespace kiln
