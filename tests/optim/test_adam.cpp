// Adam and AdamW against a float64 reference of PyTorch's algorithm, over amsgrad,
// maximize and weight decay (coupled for Adam, decoupled for AdamW), in float32 and
// float64 (and float16 / bfloat16 loosely); their state, defaults and option checks.
#include <gtest/gtest.h>

#include "tests/optim/optim_test_util.h"

namespace kiln {
namespace {

using optim::Adam;
using optim::AdamOptions;
using optim::AdamW;
using optim::AdamWOptions;
using testing::expect_matches_reference;
using testing::make_params;
using testing::optim_tolerance;

AdamWOptions as_adamw(const AdamOptions& o) {
  return AdamWOptions{.lr = o.lr,
                      .beta1 = o.beta1,
                      .beta2 = o.beta2,
                      .eps = o.eps,
                      .weight_decay = o.weight_decay,
                      .amsgrad = o.amsgrad,
                      .maximize = o.maximize};
}

TEST(OptimAdam, MatchesReferenceForEveryOptionCombination) {
  for (const DType dtype : {DType::Float32, DType::Float64})
    for (const bool decoupled : {false, true})
      for (const bool amsgrad : {false, true})
        for (const bool maximize : {false, true})
          for (const double weight_decay : {0.0, 0.1}) {
            const AdamOptions options{.lr = 0.01,
                                      .beta1 = 0.8,
                                      .beta2 = 0.9,
                                      .eps = 1e-6,
                                      .weight_decay = weight_decay,
                                      .amsgrad = amsgrad,
                                      .maximize = maximize};
            SCOPED_TRACE(std::string(decoupled ? "AdamW" : "Adam") + " amsgrad " + std::to_string(amsgrad) +
                         " maximize " + std::to_string(maximize) + " weight_decay " + std::to_string(weight_decay) +
                         " in " + std::string(dtype_name(dtype)));
            const std::vector<Tensor> params = make_params(dtype);
            const auto reference = testing::adam_reference(options, decoupled);
            if (decoupled) {
              AdamW adamw(params, as_adamw(options));
              expect_matches_reference(adamw, params, reference, 5, optim_tolerance(dtype));
            } else {
              Adam adam(params, options);
              expect_matches_reference(adam, params, reference, 5, optim_tolerance(dtype));
            }
          }
}

TEST(OptimAdam, LowPrecisionParamsMatchReferenceLoosely) {
  const AdamOptions options{.lr = 0.01, .weight_decay = 0.1, .amsgrad = true};
  for (const DType dtype : {DType::Float16, DType::BFloat16}) {
    SCOPED_TRACE(dtype_name(dtype));
    const std::vector<Tensor> params = make_params(dtype);
    AdamW adamw(params, as_adamw(options));
    expect_matches_reference(adamw, params, testing::adam_reference(options, true), 3, optim_tolerance(dtype));
    EXPECT_EQ(adamw.state(params[0]).at("exp_avg").dtype(), dtype);
    EXPECT_EQ(adamw.state(params[0]).at("step").dtype(), DType::Float32);
  }
}

TEST(OptimAdam, StateNamesAndStepCounter) {
  const std::vector<Tensor> params = make_params(DType::Float32);
  Adam adam(params, AdamOptions{.amsgrad = true});
  for (int s = 0; s < 3; ++s) {
    testing::set_step_grads(params, s);
    adam.step();
  }
  const optim::ParamState& state = adam.state(params[2]);
  ASSERT_EQ(state.size(), 4u);
  EXPECT_EQ(state.at("step").sizes(), std::vector<int64_t>{});
  EXPECT_EQ(state.at("step").item<double>(), 3.0);
  EXPECT_EQ(state.at("exp_avg").sizes(), params[2].sizes());
  EXPECT_EQ(state.at("exp_avg_sq").sizes(), params[2].sizes());
  EXPECT_EQ(state.at("max_exp_avg_sq").sizes(), params[2].sizes());
  Adam plain(make_params(DType::Float32), AdamOptions{});
  EXPECT_EQ(plain.name(), "Adam");
}

TEST(OptimAdam, DefaultsArePyTorchs) {
  const AdamOptions adam;
  EXPECT_EQ(adam.lr, 1e-3);
  EXPECT_EQ(adam.beta1, 0.9);
  EXPECT_EQ(adam.beta2, 0.999);
  EXPECT_EQ(adam.eps, 1e-8);
  EXPECT_EQ(adam.weight_decay, 0);
  EXPECT_FALSE(adam.amsgrad);
  const AdamWOptions adamw;
  EXPECT_EQ(adamw.weight_decay, 1e-2);
  AdamW optimizer(make_params(DType::Float32));
  EXPECT_EQ(optimizer.name(), "AdamW");
  EXPECT_EQ(optimizer.param_groups()[0].get("weight_decay"), 1e-2);
  EXPECT_EQ(optimizer.param_groups()[0].get("beta1"), 0.9);
}

TEST(OptimAdam, BadOptionsAreErrors) {
  const std::vector<Tensor> params = make_params(DType::Float32);
  EXPECT_KILN_ERROR(Adam(params, AdamOptions{.lr = -1}), "Adam", "lr");
  EXPECT_KILN_ERROR(Adam(params, AdamOptions{.beta1 = 1.0}), "Adam", "beta1", "[0, 1)");
  EXPECT_KILN_ERROR(Adam(params, AdamOptions{.beta2 = -0.5}), "Adam", "beta2");
  EXPECT_KILN_ERROR(Adam(params, AdamOptions{.eps = -1e-8}), "Adam", "eps");
  EXPECT_KILN_ERROR(AdamW(params, AdamWOptions{.weight_decay = -0.1}), "AdamW", "weight_decay");
  EXPECT_KILN_ERROR(Adam({optim::ParamGroup{.params = params, .options = {{"momentum", 0.9}}}}), "Adam",
                    "unknown option", "momentum");
}

}  // namespace
}  // namespace kiln
