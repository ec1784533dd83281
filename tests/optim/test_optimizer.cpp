// The Optimizer base through SGD and Adam: parameters without a gradient are skipped (no
// update, no state, no step), several groups with their own learning rates, a learning
// rate changed between steps, zero_grad both ways, mixed dtypes in one group, and the
// checks of add_param_group.
#include <gtest/gtest.h>

#include "tests/optim/optim_test_util.h"

namespace kiln {
namespace {

using optim::Adam;
using optim::AdamOptions;
using optim::ParamGroup;
using optim::SGD;
using optim::SGDOptions;
using testing::all_close;
using testing::all_equal;
using testing::make_params;

TEST(Optimizer, ParamsWithoutGradAreSkippedAndTheirStateDoesNotAdvance) {
  const std::vector<Tensor> params = make_params(DType::Float32);
  Adam adam(params, AdamOptions{.lr = 0.1});
  testing::set_step_grads(params, 0);
  adam.step();
  const Tensor before = params[1].detach().clone();
  const Tensor exp_avg_before = adam.state(params[1]).at("exp_avg").clone();
  params[1].set_grad(Tensor());
  params[0].set_grad(testing::step_grad(params[0], 0, 1));
  const Tensor other_before = params[0].detach().clone();
  adam.step();
  EXPECT_TRUE(all_equal(params[1].detach(), before));
  EXPECT_TRUE(all_equal(adam.state(params[1]).at("exp_avg"), exp_avg_before));
  EXPECT_EQ(adam.state(params[1]).at("step").item<double>(), 1.0);
  EXPECT_EQ(adam.state(params[0]).at("step").item<double>(), 2.0);
  EXPECT_FALSE(all_equal(params[0].detach(), other_before));

  // A parameter that never had a gradient has no state at all.
  const std::vector<Tensor> fresh = make_params(DType::Float32);
  SGD sgd(fresh, SGDOptions{.lr = 0.1, .momentum = 0.9});
  fresh[0].set_grad(testing::step_grad(fresh[0], 0, 0));
  const Tensor untouched = fresh[2].detach().clone();
  sgd.step();
  EXPECT_TRUE(sgd.state(fresh[2]).empty());
  EXPECT_TRUE(all_equal(fresh[2].detach(), untouched));
  EXPECT_EQ(sgd.state(fresh[0]).count("momentum_buffer"), 1u);
}

TEST(Optimizer, GroupsUseTheirOwnOptions) {
  const std::vector<Tensor> params = make_params(DType::Float64);
  SGD sgd({ParamGroup{.params = {params[0], params[1]}, .options = {{"lr", 0.5}}},
           ParamGroup{.params = {params[2]}, .options = {{"momentum", 0.9}}}},
          SGDOptions{.lr = 0.1});
  ASSERT_EQ(sgd.param_groups().size(), 2u);
  EXPECT_EQ(sgd.param_groups()[0].lr(), 0.5);
  EXPECT_EQ(sgd.param_groups()[1].lr(), 0.1);
  EXPECT_EQ(sgd.param_groups()[1].get("momentum"), 0.9);
  EXPECT_EQ(sgd.param_groups()[0].get("momentum"), 0.0);
  const std::vector<Tensor> before = testing::clone_params(params);
  testing::set_step_grads(params, 0);
  sgd.step();
  // Plain SGD: p - lr g, with each group's lr (momentum's first step is the gradient too).
  for (size_t i = 0; i < params.size(); ++i) {
    const double lr = i < 2 ? 0.5 : 0.1;
    const Tensor expected = before[i].detach() - params[i].grad() * lr;
    EXPECT_TRUE(all_close(params[i].detach(), expected)) << "parameter " << i;
  }
}

TEST(Optimizer, ChangingTheLearningRateBetweenStepsTakesEffect) {
  const SGDOptions options{.lr = 0.1, .momentum = 0.5};
  const std::vector<Tensor> params = make_params(DType::Float64);
  SGD sgd(params, options);
  std::vector<testing::RefParam> ref(params.size());
  for (size_t i = 0; i < params.size(); ++i) ref[i].value = params[i].to_vector<double>();
  const testing::RefUpdate reference = testing::sgd_reference(options);
  const std::vector<double> lrs = {0.1, 0.02, 0.3, 0.0};
  for (size_t s = 0; s < lrs.size(); ++s) {
    sgd.param_groups()[0].set_lr(lrs[s]);
    testing::set_step_grads(params, static_cast<int64_t>(s));
    for (size_t i = 0; i < params.size(); ++i) reference(ref[i], params[i].grad().to_vector<double>(), lrs[s]);
    sgd.step();
  }
  for (size_t i = 0; i < params.size(); ++i)
    EXPECT_TRUE(all_close(params[i].detach(), tensor<double>(ref[i].value, params[i].sizes())));
}

TEST(Optimizer, ZeroGradSetsToNoneOrFillsZeros) {
  const std::vector<Tensor> params = make_params(DType::Float32);
  SGD sgd(params, SGDOptions{.lr = 0.1});
  testing::set_step_grads(params, 0);
  sgd.zero_grad(/*set_to_none=*/false);
  for (const Tensor& p : params) {
    ASSERT_TRUE(p.grad().defined());
    EXPECT_TRUE(all_equal(p.grad(), zeros_like(p)));
  }
  sgd.zero_grad();
  for (const Tensor& p : params) EXPECT_FALSE(p.grad().defined());
  // A backward after set-to-none assigns a fresh gradient (not added to stale zeros).
  (params[0] * params[0]).sum().backward();
  EXPECT_TRUE(all_close(params[0].grad(), params[0].detach() * 2.0));
}

TEST(Optimizer, OneGroupMayMixDtypes) {
  std::vector<Tensor> params = make_params(DType::Float32);
  Tensor double_param = testing::random_nonzero({4}, DType::Float64, 99);
  double_param.requires_grad_(true);
  params.push_back(double_param);
  const SGDOptions options{.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01};
  SGD sgd(params, options);
  testing::expect_matches_reference(sgd, params, testing::sgd_reference(options), 3,
                                    testing::optim_tolerance(DType::Float32));
  EXPECT_EQ(sgd.state(double_param).at("momentum_buffer").dtype(), DType::Float64);
}

// step() writes in place with autograd off: the parameters stay leaves with no grad_fn,
// and a graph that saved a parameter before the step sees its version change and
// refuses to backward with the stale value (Note [Version counter]).
TEST(Optimizer, StepRecordsNoGraphAndBumpsVersions) {
  for (const bool adam : {false, true}) {
    SCOPED_TRACE(adam ? "Adam" : "SGD");
    const std::vector<Tensor> params = make_params(DType::Float32);
    std::unique_ptr<optim::Optimizer> optimizer;
    if (adam) optimizer = std::make_unique<Adam>(params, AdamOptions{.lr = 0.1});
    else optimizer = std::make_unique<SGD>(params, SGDOptions{.lr = 0.1, .momentum = 0.9});
    const Tensor saved_before_step = (params[0] * params[0]).sum();
    testing::set_step_grads(params, 0);
    const uint32_t version = params[0].version();
    optimizer->step();
    for (const Tensor& p : params) {
      EXPECT_TRUE(p.is_leaf());
      EXPECT_TRUE(p.requires_grad());
      EXPECT_EQ(p.grad_fn(), nullptr);
    }
    EXPECT_GT(params[0].version(), version);
    for (const auto& [name, state] : optimizer->state(params[0])) EXPECT_FALSE(state.requires_grad()) << name;
    EXPECT_KILN_ERROR(saved_before_step.backward(), "modified by an in-place operation");
  }
}

TEST(Optimizer, AddParamGroupChecksItsParameters) {
  const std::vector<Tensor> params = make_params(DType::Float32);
  SGD sgd(std::vector<Tensor>{params[0]}, SGDOptions{.lr = 0.1});
  EXPECT_KILN_ERROR(sgd.add_param_group(ParamGroup{.params = {params[0]}, .options = {}}), "SGD",
                    "more than one parameter group");
  EXPECT_KILN_ERROR(sgd.add_param_group(ParamGroup{.params = {ones({2}, {.dtype = DType::Int64})}, .options = {}}),
                    "SGD", "int64", "floating-point");
  const Tensor non_leaf = params[1] * 2.0;
  EXPECT_KILN_ERROR(sgd.add_param_group(ParamGroup{.params = {non_leaf}, .options = {}}), "SGD", "not a leaf");
  // A strided (not dense) leaf is refused up front, not in the middle of a step.
  const Tensor strided =
      testing::random_nonzero({3, 8}, DType::Float32, 5).slice(1, 0, 8, 2).detach().requires_grad_(true);
  EXPECT_KILN_ERROR(sgd.add_param_group(ParamGroup{.params = {strided}, .options = {}}), "SGD", "not dense",
                    "strides [8, 2]");
  EXPECT_KILN_ERROR(sgd.add_param_group(ParamGroup{.params = {params[1]}, .options = {{"lr", -2}}}), "SGD", "lr");
  EXPECT_KILN_ERROR(sgd.add_param_group(ParamGroup{.params = {params[1]}, .options = {{"betas", 0.9}}}), "SGD",
                    "unknown option", "betas");
  EXPECT_EQ(sgd.param_groups().size(), 1u);  // none of the bad groups was added
  sgd.add_param_group(ParamGroup{.params = {params[1]}, .options = {{"lr", 0.01}, {"initial_lr", 0.01}}});
  EXPECT_EQ(sgd.param_groups()[1].lr(), 0.01);
  EXPECT_KILN_ERROR(sgd.param_groups()[1].get("beta1"), "no option", "beta1");
}

// Note [Optimizer layouts]: a dense parameter of another layout (a channels-last weight, a
// transpose) is updated in its layout, its state made in it, a gradient in another
// layout (or a loaded state tensor) copied into it: bit for bit the numbers of a row-major
// twin (the update is elementwise), for SGD with momentum and for Adam.
template <typename MakeOptimizer>
void expect_layout_free_updates(MakeOptimizer make, const std::string& state_key) {
  const Tensor values = testing::random_nonzero({2, 3, 2, 3, 4}, DType::Float32, 7);
  const Tensor grad = testing::random_nonzero({2, 3, 2, 3, 4}, DType::Float32, 8);
  const Tensor row_major = values.clone().requires_grad_(true);
  const Tensor cl = values.contiguous(MemoryFormat::ChannelsLast3d).detach().requires_grad_(true);
  auto row_optimizer = make(row_major);
  auto cl_optimizer = make(cl);
  for (int step = 0; step < 3; ++step) {
    row_major.set_grad(grad.clone());
    cl.set_grad(step == 1 ? grad.clone() : grad.contiguous(MemoryFormat::ChannelsLast3d));  // row-major once
    row_optimizer.step();
    cl_optimizer.step();
  }
  EXPECT_TRUE(cl.is_contiguous(MemoryFormat::ChannelsLast3d));
  EXPECT_TRUE(testing::all_equal(cl.detach().contiguous(), row_major.detach()));
  const Tensor& state = cl_optimizer.state(cl).at(state_key);
  EXPECT_TRUE(state.is_contiguous(MemoryFormat::ChannelsLast3d)) << "state laid out as the parameter";
  EXPECT_TRUE(testing::all_equal(state.contiguous(), row_optimizer.state(row_major).at(state_key)));
  // A loaded state (row-major, as a file gives it) is laid out as the parameter too.
  auto loaded = make(cl);
  loaded.load_state_dict(cl_optimizer.state_dict());
  EXPECT_TRUE(loaded.state(cl).at(state_key).is_contiguous(MemoryFormat::ChannelsLast3d));
  EXPECT_TRUE(testing::all_equal(loaded.state(cl).at(state_key).contiguous(), state.contiguous()));
}

TEST(Optimizer, UpdatesDenseParametersOfAnyLayoutAsRowMajorOnes) {
  {
    SCOPED_TRACE("SGD with momentum");
    expect_layout_free_updates(
        [](const Tensor& p) { return SGD({p}, SGDOptions{.lr = 0.1, .momentum = 0.9}); }, "momentum_buffer");
  }
  {
    SCOPED_TRACE("Adam");
    expect_layout_free_updates([](const Tensor& p) { return Adam({p}, AdamOptions{.lr = 0.1}); }, "exp_avg");
  }
}

}  // namespace
}  // namespace kiln
