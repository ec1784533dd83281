// SGD against a float64 reference of PyTorch's algorithm, over every combination of
// momentum, dampening, Nesterov, weight decay and maximize, in float32 and float64 (and
// float16 / bfloat16 with a looser tolerance); its state and its option checks.
#include <gtest/gtest.h>

#include "tests/optim/optim_test_util.h"

namespace kiln {
namespace {

using optim::SGD;
using optim::SGDOptions;
using testing::expect_matches_reference;
using testing::make_params;
using testing::optim_tolerance;

std::vector<SGDOptions> all_sgd_options() {
  std::vector<SGDOptions> out;
  for (const double momentum : {0.0, 0.9})
    for (const double dampening : {0.0, 0.3})
      for (const bool nesterov : {false, true})
        for (const double weight_decay : {0.0, 0.1})
          for (const bool maximize : {false, true}) {
            if (nesterov && (momentum == 0 || dampening != 0)) continue;
            out.push_back(SGDOptions{.lr = 0.05,
                                     .momentum = momentum,
                                     .dampening = dampening,
                                     .weight_decay = weight_decay,
                                     .nesterov = nesterov,
                                     .maximize = maximize});
          }
  return out;
}

std::string describe(const SGDOptions& o) {
  return "momentum " + std::to_string(o.momentum) + " dampening " + std::to_string(o.dampening) + " nesterov " +
         std::to_string(o.nesterov) + " weight_decay " + std::to_string(o.weight_decay) + " maximize " +
         std::to_string(o.maximize);
}

TEST(OptimSGD, MatchesReferenceForEveryOptionCombination) {
  for (const DType dtype : {DType::Float32, DType::Float64}) {
    for (const SGDOptions& options : all_sgd_options()) {
      SCOPED_TRACE(describe(options) + " in " + std::string(dtype_name(dtype)));
      const std::vector<Tensor> params = make_params(dtype);
      SGD sgd(params, options);
      expect_matches_reference(sgd, params, testing::sgd_reference(options), 4, optim_tolerance(dtype));
    }
  }
}

TEST(OptimSGD, LowPrecisionParamsMatchReferenceLoosely) {
  const SGDOptions options{.lr = 0.05, .momentum = 0.9, .dampening = 0, .weight_decay = 0.1, .nesterov = true};
  for (const DType dtype : {DType::Float16, DType::BFloat16}) {
    SCOPED_TRACE(dtype_name(dtype));
    const std::vector<Tensor> params = make_params(dtype);
    SGD sgd(params, options);
    expect_matches_reference(sgd, params, testing::sgd_reference(options), 3, optim_tolerance(dtype));
    EXPECT_EQ(sgd.state(params[0]).at("momentum_buffer").dtype(), dtype);
  }
}

TEST(OptimSGD, StateHasMomentumBufferOnlyWithMomentumAndNoStepCounter) {
  const std::vector<Tensor> plain_params = make_params(DType::Float32);
  SGD plain(plain_params, SGDOptions{.lr = 0.1});
  testing::set_step_grads(plain_params, 0);
  plain.step();
  EXPECT_TRUE(plain.state(plain_params[0]).empty());

  const std::vector<Tensor> params = make_params(DType::Float32);
  SGD sgd(params, SGDOptions{.lr = 0.1, .momentum = 0.5});
  EXPECT_TRUE(sgd.state(params[1]).empty());
  testing::set_step_grads(params, 0);
  sgd.step();
  const optim::ParamState& state = sgd.state(params[1]);
  ASSERT_EQ(state.size(), 1u);
  // The first buffer is the first gradient itself (PyTorch's clone).
  EXPECT_TRUE(testing::all_close(state.at("momentum_buffer"), params[1].grad()));
  EXPECT_EQ(sgd.name(), "SGD");
  EXPECT_EQ(sgd.defaults().at("momentum"), 0.5);
}

TEST(OptimSGD, DefaultsArePyTorchs) {
  const SGDOptions o;
  EXPECT_EQ(o.lr, 1e-3);
  EXPECT_EQ(o.momentum, 0);
  EXPECT_EQ(o.dampening, 0);
  EXPECT_EQ(o.weight_decay, 0);
  EXPECT_FALSE(o.nesterov);
  EXPECT_FALSE(o.maximize);
}

TEST(OptimSGD, BadOptionsAreErrors) {
  const std::vector<Tensor> params = make_params(DType::Float32);
  EXPECT_KILN_ERROR(SGD(params, SGDOptions{.lr = -0.1}), "SGD", "lr", "-0.1");
  EXPECT_KILN_ERROR(SGD(params, SGDOptions{.lr = 0.1, .momentum = -1}), "SGD", "momentum");
  EXPECT_KILN_ERROR(SGD(params, SGDOptions{.lr = 0.1, .weight_decay = -1}), "SGD", "weight_decay");
  EXPECT_KILN_ERROR(SGD(params, SGDOptions{.lr = 0.1, .nesterov = true}), "SGD", "nesterov", "momentum > 0");
  EXPECT_KILN_ERROR(SGD(params, SGDOptions{.lr = 0.1, .momentum = 0.9, .dampening = 0.1, .nesterov = true}),
                    "SGD", "nesterov", "dampening");
  EXPECT_KILN_ERROR(SGD(std::vector<Tensor>{}), "SGD", "no parameters");
  EXPECT_KILN_ERROR(SGD(std::vector<optim::ParamGroup>{}), "SGD", "empty");
  EXPECT_KILN_ERROR(SGD({optim::ParamGroup{.params = params, .options = {{"nesterov", 2}}}}), "SGD", "nesterov",
                    "flag");
}

}  // namespace
}  // namespace kiln
