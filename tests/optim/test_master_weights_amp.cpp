// Mixed precision support in the optimizer: float32 master weights for float16 params
// (Note [Master weights]: tiny updates accumulate in the masters and would be lost
// without them; the state dict carries the masters), and GradScaler's hooks: a step with
// amp.found_inf set changes nothing, a step with amp.inv_scale equals a step on
// pre-divided gradients, and unscale_grads_ / check_grads_finite_ report non-finite
// gradients per device.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "tests/optim/optim_test_util.h"

namespace kiln {
namespace {

using optim::Adam;
using optim::AdamOptions;
using optim::Optimizer;
using optim::SGD;
using optim::SGDOptions;
using testing::all_close;
using testing::all_equal;
using testing::make_params;

Tensor f32_scalar(float value) { return full({1}, value, {.dtype = DType::Float32}); }

// The master weight of parameter `index` as the state dict shows it (undefined if none).
Tensor master_in_state_dict(const Optimizer& optimizer, int index) {
  for (const auto& [name, tensor] : optimizer.state_dict().tensors)
    if (name == "state." + std::to_string(index) + ".master_weight") return tensor;
  return Tensor();
}

TEST(OptimMasterWeights, TinyUpdatesAccumulateInTheMasters) {
  // lr * grad = 1e-4 is below half the float16 spacing just under 1 (2^-11 / 2 ~ 2.4e-4),
  // so a float16 parameter at 1 never moves by itself.
  const double lr = 1e-4;
  const int steps = 10;
  Tensor plain = ones({8}, {.dtype = DType::Float16});
  plain.requires_grad_(true);
  Tensor mastered = ones({8}, {.dtype = DType::Float16});
  mastered.requires_grad_(true);
  SGD without({plain}, SGDOptions{.lr = lr});
  SGD with({mastered}, SGDOptions{.lr = lr});
  with.enable_master_weights();
  EXPECT_TRUE(with.has_master_weights());
  for (int s = 0; s < steps; ++s) {
    plain.set_grad(ones({8}, {.dtype = DType::Float16}));
    mastered.set_grad(ones({8}, {.dtype = DType::Float16}));
    without.step();
    with.step();
  }
  EXPECT_TRUE(all_equal(plain.detach(), ones({8}, {.dtype = DType::Float16})));  // lost
  const Tensor master = master_in_state_dict(with, 0);
  ASSERT_TRUE(master.defined());
  EXPECT_EQ(master.dtype(), DType::Float32);
  const Tensor expected = full({8}, 1.0 - steps * lr, {.dtype = DType::Float64});
  EXPECT_TRUE(all_close(master.to(DType::Float64), expected, {.atol = 1e-6, .rtol = 0}));
  // The model's parameter is its master rounded to float16.
  EXPECT_TRUE(all_equal(mastered.detach(), master.to(DType::Float16)));
  EXPECT_LT(mastered.detach().to(DType::Float64).max().item<double>(), 1.0);
}

TEST(OptimMasterWeights, AdamOnFloat16ParamsFollowsTheFloat32Reference) {
  const AdamOptions options{.lr = 0.01, .weight_decay = 0.1};
  const std::vector<Tensor> params = make_params(DType::Float16);
  Adam adam(params, options);
  adam.enable_master_weights();
  // Masters are updated in float32 from the float16 gradients: the reference sees the
  // same gradients and the float16 parameters are the masters rounded.
  testing::expect_matches_reference(adam, params, testing::adam_reference(options, false), 4,
                                    {.atol = 2e-3, .rtol = 2e-3});
  for (size_t i = 0; i < params.size(); ++i) {
    const optim::ParamState& state = adam.state(params[i]);
    EXPECT_EQ(state.at("exp_avg").dtype(), DType::Float32);
    EXPECT_EQ(state.at("step").item<double>(), 4.0);
    EXPECT_TRUE(all_equal(params[i].detach(), master_in_state_dict(adam, static_cast<int>(i)).to(DType::Float16)));
  }
}

TEST(OptimMasterWeights, StateDictCarriesMastersAndFloat32ParamsKeepNone) {
  std::vector<Tensor> params = make_params(DType::BFloat16);
  Tensor f32 = testing::random_nonzero({3}, DType::Float32, 5);
  f32.requires_grad_(true);
  params.push_back(f32);
  SGD sgd(params, SGDOptions{.lr = 0.1, .momentum = 0.9});
  sgd.enable_master_weights();
  testing::set_step_grads(params, 0);
  sgd.step();
  EXPECT_TRUE(master_in_state_dict(sgd, 0).defined());
  EXPECT_FALSE(master_in_state_dict(sgd, 3).defined());
  EXPECT_EQ(sgd.state(params[0]).at("momentum_buffer").dtype(), DType::Float32);
  EXPECT_EQ(sgd.state(f32).at("momentum_buffer").dtype(), DType::Float32);
  // zero_grad clears the master gradients with the model's.
  const Tensor master = master_in_state_dict(sgd, 0);
  EXPECT_TRUE(master.grad().defined());
  sgd.zero_grad();
  EXPECT_FALSE(master.grad().defined());
  EXPECT_FALSE(params[0].grad().defined());
  EXPECT_KILN_ERROR(sgd.enable_master_weights(), "SGD", "before the first step");

  // Loading masters into an optimizer that keeps none is an error.
  SGD no_masters(testing::clone_params(params), SGDOptions{.lr = 0.1, .momentum = 0.9});
  EXPECT_KILN_ERROR(no_masters.load_state_dict(sgd.state_dict()), "master_weight", "enable_master_weights");
}

TEST(OptimMasterWeights, MasterParamsHoldTheUnscaledGradientsStepReads) {
  std::vector<Tensor> params = make_params(DType::Float16);
  SGD sgd(params, SGDOptions{.lr = 0.1});
  EXPECT_TRUE(sgd.master_params()[0].is_same(params[0]));  // no master weights: the params
  sgd.enable_master_weights();
  testing::set_step_grads(params, 0);
  sgd.unscale_grads_(f32_scalar(0.5f));
  const std::vector<Tensor> masters = sgd.master_params();
  ASSERT_EQ(masters.size(), params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_EQ(masters[i].dtype(), DType::Float32);
    EXPECT_TRUE(all_equal(masters[i].detach(), params[i].detach().to(DType::Float32)));
    EXPECT_TRUE(all_equal(masters[i].grad(), params[i].grad().to(DType::Float32) * 0.5));
  }
  // Gradient clipping on the masters (what step reads) shows in the step: halving the
  // master gradients halves the update.
  const Tensor before = masters[1].detach().clone();
  masters[1].grad().mul_(0.5);
  sgd.step();
  EXPECT_TRUE(all_close(masters[1].detach(), before - params[1].grad().to(DType::Float32) * (0.5 * 0.5 * 0.1)));
}

TEST(OptimMasterWeights, ResumeFromFileIsBitIdentical) {
  testing::TempFolder dir;
  const AdamOptions options{.lr = 0.01, .amsgrad = true};
  const std::vector<Tensor> straight = make_params(DType::Float16);
  Adam uninterrupted(straight, options);
  uninterrupted.enable_master_weights();
  const std::vector<Tensor> halves = make_params(DType::Float16);
  Adam first(halves, options);
  first.enable_master_weights();
  for (int s = 0; s < 3; ++s) {
    testing::set_step_grads(straight, s);
    uninterrupted.step();
    testing::set_step_grads(halves, s);
    first.step();
  }
  optim::save_state_dict(first.state_dict(), dir.file("o2.safetensors"));
  const std::vector<Tensor> resumed = testing::clone_params(halves);
  Adam second(resumed, options);
  second.enable_master_weights();
  second.load_state_dict(optim::load_state_dict_file(dir.file("o2.safetensors")));
  for (int s = 3; s < 6; ++s) {
    testing::set_step_grads(straight, s);
    uninterrupted.step();
    testing::set_step_grads(resumed, s);
    second.step();
  }
  for (size_t i = 0; i < straight.size(); ++i) {
    EXPECT_TRUE(all_equal(resumed[i].detach(), straight[i].detach()));
    EXPECT_TRUE(all_equal(master_in_state_dict(second, static_cast<int>(i)),
                          master_in_state_dict(uninterrupted, static_cast<int>(i))));
  }
}

// A state dict without masters (one saved before enable_master_weights, or by another
// optimizer) restarts the masters from the model's current weights, as at a first step:
// the masters kept from before the load would write stale values back into the model.
TEST(OptimMasterWeights, LoadingAStateDictWithoutMastersTakesTheModelWeights) {
  const std::vector<Tensor> params = make_params(DType::BFloat16);
  SGD sgd(params, SGDOptions{.lr = 0.1, .momentum = 0.9});
  sgd.enable_master_weights();
  testing::set_step_grads(params, 0);
  sgd.step();
  optim::OptimizerStateDict saved = sgd.state_dict();
  std::erase_if(saved.tensors, [](const auto& named) { return named.first.ends_with(".master_weight"); });
  // A model checkpoint loaded into the parameters, then the optimizer's state.
  const std::vector<Tensor> checkpoint = make_params(DType::BFloat16, /*seed=*/99);
  {
    NoGradGuard no_grad;
    for (size_t i = 0; i < params.size(); ++i) params[i].detach().copy_(checkpoint[i]);
  }
  sgd.load_state_dict(saved);
  for (size_t i = 0; i < params.size(); ++i)
    EXPECT_TRUE(all_equal(sgd.master_params()[i].detach(), checkpoint[i].detach().to(DType::Float32))) << i;
  // A zero learning rate moves nothing: the model keeps the checkpoint's weights.
  sgd.param_groups()[0].set_lr(0.0);
  testing::set_step_grads(params, 1);
  sgd.step();
  for (size_t i = 0; i < params.size(); ++i) EXPECT_TRUE(all_equal(params[i].detach(), checkpoint[i].detach())) << i;
}

// Parameters, state and step counters of `optimizer`, cloned.
std::vector<Tensor> everything(const Optimizer& optimizer) {
  std::vector<Tensor> out;
  for (const auto& [name, tensor] : optimizer.state_dict().tensors) out.push_back(tensor.clone());
  for (const Tensor& p : optimizer.param_groups()[0].params) out.push_back(p.detach().clone());
  return out;
}

TEST(OptimAmp, FoundInfChangesNothing) {
  for (const bool master_weights : {false, true}) {
    SCOPED_TRACE(master_weights ? "with master weights" : "without master weights");
    const std::vector<Tensor> params = make_params(master_weights ? DType::Float16 : DType::Float32);
    Adam adam(params, AdamOptions{.lr = 0.1, .amsgrad = true});
    if (master_weights) adam.enable_master_weights();
    testing::set_step_grads(params, 0);
    adam.step();
    const std::vector<Tensor> before = everything(adam);
    testing::set_step_grads(params, 1);
    adam.step({.inv_scale = f32_scalar(0.5f), .found_inf = f32_scalar(1.0f)});
    const std::vector<Tensor> after = everything(adam);
    ASSERT_EQ(after.size(), before.size());
    for (size_t i = 0; i < before.size(); ++i) EXPECT_TRUE(all_equal(after[i], before[i])) << "tensor " << i;
    // found_inf = 0 steps normally.
    adam.step({.inv_scale = Tensor(), .found_inf = f32_scalar(0.0f)});
    EXPECT_EQ(adam.state(params[0]).at("step").item<double>(), 2.0);
  }
}

// Bad AMP arguments are an error before anything is written: no parameter, state or step
// counter changes (a counter advanced without its update would skew Adam's bias
// correction from then on).
TEST(OptimAmp, BadAmpArgumentsChangeNothing) {
  const std::vector<Tensor> params = make_params(DType::Float32);
  Adam adam(params, AdamOptions{.lr = 0.1});
  testing::set_step_grads(params, 0);
  adam.step();
  const std::vector<Tensor> before = everything(adam);
  testing::set_step_grads(params, 1);
  const Tensor f64 = full({1}, 0.5, {.dtype = DType::Float64});
  EXPECT_KILN_ERROR(adam.step({.inv_scale = f64, .found_inf = Tensor()}), "Adam", "inv_scale", "float32", "[1]");
  EXPECT_KILN_ERROR(adam.step({.inv_scale = Tensor(), .found_inf = zeros({2})}), "Adam", "found_inf", "[1]");
  const std::vector<Tensor> after = everything(adam);
  ASSERT_EQ(after.size(), before.size());
  for (size_t i = 0; i < before.size(); ++i) EXPECT_TRUE(all_equal(after[i], before[i])) << "tensor " << i;
}

// Note [SGD first step]: a skipped first step leaves the new momentum buffers at zero, so
// the next step (not a "first" one any more) gives buf = momentum 0 + (1 - dampening) g,
// which is PyTorch's clone of g when dampening = 0 (the default).
TEST(OptimAmp, SgdFirstStepSkippedStillStartsTheBufferAtTheGradient) {
  const SGDOptions options{.lr = 0.1, .momentum = 0.9};
  const std::vector<Tensor> params = make_params(DType::Float64);
  SGD sgd(params, options);
  const std::vector<Tensor> start = testing::clone_params(params);
  testing::set_step_grads(params, 0);
  sgd.step({.inv_scale = Tensor(), .found_inf = f32_scalar(1.0f)});
  testing::set_step_grads(params, 1);
  sgd.step();
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_TRUE(all_equal(sgd.state(params[i]).at("momentum_buffer"), params[i].grad())) << i;
    const Tensor want = start[i].detach() - params[i].grad() * options.lr;
    EXPECT_TRUE(all_close(params[i].detach(), want, testing::optim_tolerance(DType::Float64))) << i;
  }
}

TEST(OptimAmp, InvScaleEqualsPreDividedGradients) {
  const float scale = 1024.0f;  // a power of two: scaling is exact, so results must be equal
  for (const bool master_weights : {false, true}) {
    SCOPED_TRACE(master_weights ? "with master weights" : "without master weights");
    const DType dtype = master_weights ? DType::Float16 : DType::Float32;
    const std::vector<Tensor> scaled = make_params(dtype);
    const std::vector<Tensor> divided = testing::clone_params(scaled);
    Adam a(scaled, AdamOptions{.lr = 0.1});
    Adam b(divided, AdamOptions{.lr = 0.1});
    if (master_weights) {
      a.enable_master_weights();
      b.enable_master_weights();
    }
    for (int s = 0; s < 3; ++s) {
      testing::set_step_grads(divided, s);
      for (size_t i = 0; i < scaled.size(); ++i) scaled[i].set_grad(divided[i].grad() * static_cast<double>(scale));
      a.step({.inv_scale = f32_scalar(1.0f / scale), .found_inf = Tensor()});
      b.step();
    }
    for (size_t i = 0; i < scaled.size(); ++i) EXPECT_TRUE(all_equal(scaled[i].detach(), divided[i].detach()));
  }
}

TEST(OptimAmp, UnscaleGradsReportsNonFiniteGradientsPerDevice) {
  const std::vector<Tensor> params = make_params(DType::Float32);
  SGD sgd(params, SGDOptions{.lr = 0.1});
  testing::set_step_grads(params, 0);
  const std::vector<Tensor> grads = {params[0].grad().clone(), params[1].grad().clone(), params[2].grad().clone()};

  // Check only: reports 0 and writes nothing.
  std::vector<Tensor> found = sgd.check_grads_finite_(f32_scalar(0.25f));
  ASSERT_EQ(found.size(), 1u);  // every parameter is on the CPU
  EXPECT_EQ(found[0].sizes(), std::vector<int64_t>{1});
  EXPECT_EQ(found[0].dtype(), DType::Float32);
  EXPECT_EQ(found[0].item<double>(), 0.0);
  EXPECT_TRUE(all_equal(params[1].grad(), grads[1]));

  // Unscale: gradients multiplied in place.
  found = sgd.unscale_grads_(f32_scalar(0.25f));
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].item<double>(), 0.0);
  for (size_t i = 0; i < params.size(); ++i) EXPECT_TRUE(all_equal(params[i].grad(), grads[i] * 0.25));
  sgd.zero_grad();

  // One list may mix dtypes; parameters without gradients are left out.
  std::vector<Tensor> mixed = make_params(DType::Float16);
  mixed.push_back(make_params(DType::Float64, 3)[1]);
  mixed.push_back(make_params(DType::Float32, 4)[2]);
  SGD mixed_sgd(mixed, SGDOptions{.lr = 0.1});
  EXPECT_EQ(mixed_sgd.unscale_grads_(f32_scalar(0.25f))[0].item<double>(), 0.0);  // no gradients at all
  testing::set_step_grads(mixed, 0);
  mixed[1].set_grad(Tensor());
  mixed[3].set_grad(mixed[3].grad().clone().fill_(std::nan("")));
  EXPECT_EQ(mixed_sgd.check_grads_finite_(f32_scalar(0.25f))[0].item<double>(), 1.0);

  // A NaN or an Inf anywhere is found.
  for (const double bad : {std::numeric_limits<double>::infinity(), std::nan("")}) {
    testing::set_step_grads(params, 1);
    Tensor grad = params[2].grad().clone();
    grad.view({-1}).narrow(0, 4, 1).fill_(bad);
    params[2].set_grad(grad);
    EXPECT_EQ(sgd.check_grads_finite_(f32_scalar(0.5f))[0].item<double>(), 1.0);
    EXPECT_EQ(sgd.unscale_grads_(f32_scalar(0.5f))[0].item<double>(), 1.0);
    sgd.zero_grad();
  }
}

TEST(OptimAmp, StepAfterUnscaleGradsDoesNotUnscaleAgain) {
  for (const bool master_weights : {false, true}) {
    SCOPED_TRACE(master_weights ? "with master weights" : "without master weights");
    const DType dtype = master_weights ? DType::Float16 : DType::Float32;
    const std::vector<Tensor> scaled = make_params(dtype);
    const std::vector<Tensor> divided = testing::clone_params(scaled);
    SGD a(scaled, SGDOptions{.lr = 0.1, .momentum = 0.9});
    SGD b(divided, SGDOptions{.lr = 0.1, .momentum = 0.9});
    if (master_weights) {
      a.enable_master_weights();
      b.enable_master_weights();
    }
    for (int s = 0; s < 2; ++s) {
      testing::set_step_grads(divided, s);
      for (size_t i = 0; i < scaled.size(); ++i) scaled[i].set_grad(divided[i].grad() * 64.0);
      const Tensor inv_scale = f32_scalar(1.0f / 64.0f);
      const std::vector<Tensor> found = a.unscale_grads_(inv_scale);  // Note [Unscaled once]
      if (master_weights) {
        EXPECT_TRUE(all_equal(scaled[0].grad(), divided[0].grad() * 64.0));  // model grads kept
      }
      a.step({.inv_scale = inv_scale, .found_inf = found[0]});
      b.step();
    }
    for (size_t i = 0; i < scaled.size(); ++i) EXPECT_TRUE(all_equal(scaled[i].detach(), divided[i].detach()));
  }
}

}  // namespace
}  // namespace kiln
