// The optimizers on the GPU follow the same optimizers on the CPU: SGD, AdamW and RMSprop
// with their fused multi-tensor kernels, in every floating dtype (float16 also with
// float32 master weights), GradScaler's tensors living on the CPU while the parameters
// live on the GPU (copied without a host sync, found_inf skipping the step), and
// unscale_grads_ answering one found_inf per device for parameters on both devices.
// Tolerance: both sides compute in float32 (float64 for float64), but the GPU's sqrt and
// fused multiply-adds round differently, so each step may differ by a few roundings.
#include <gtest/gtest.h>

#include <functional>
#include <limits>
#include <memory>

#include "tests/cuda/cuda_test_util.h"
#include "tests/optim/optim_test_util.h"

namespace kiln {
namespace {

using optim::Optimizer;
using testing::kCuda;

using MakeOptimizer = std::function<std::unique_ptr<Optimizer>(const std::vector<Tensor>& params)>;

std::vector<std::pair<std::string, MakeOptimizer>> optimizers() {
  return {
      {"SGD",
       [](const std::vector<Tensor>& p) {
         return std::make_unique<optim::SGD>(p, optim::SGDOptions{.lr = 0.05, .momentum = 0.9, .weight_decay = 0.01,
                                                                  .nesterov = true});
       }},
      {"AdamW",
       [](const std::vector<Tensor>& p) {
         return std::make_unique<optim::AdamW>(p, optim::AdamWOptions{.lr = 0.01, .amsgrad = true});
       }},
      {"RMSprop",
       [](const std::vector<Tensor>& p) {
         return std::make_unique<optim::RMSprop>(p, optim::RMSpropOptions{.lr = 0.01, .momentum = 0.5,
                                                                          .centered = true});
       }},
  };
}

std::vector<Tensor> on_device(const std::vector<Tensor>& params, Device device) {
  std::vector<Tensor> out;
  for (const Tensor& p : params) {
    Tensor copy = p.detach().to(device, p.dtype(), false, /*copy=*/true);
    copy.requires_grad_(true);
    out.push_back(copy);
  }
  return out;
}

void set_grads_on(const std::vector<Tensor>& params, int64_t step) {
  for (size_t i = 0; i < params.size(); ++i)
    params[i].set_grad(testing::step_grad(params[i].detach().cpu(), static_cast<int64_t>(i), step).to(params[i].device()));
}

TEST(CudaOptim, StepsFollowTheCpu) {
  KILN_REQUIRE_CUDA();
  for (const auto& [name, make] : optimizers()) {
    for (const DType dtype : testing::kFloatingDTypes) {
      for (const bool masters : {false, true}) {
        if (masters && dtype != DType::Float16) continue;
        SCOPED_TRACE(name + " in " + std::string(dtype_name(dtype)) + (masters ? " with master weights" : ""));
        const std::vector<Tensor> cpu = testing::make_params(dtype);
        const std::vector<Tensor> gpu = on_device(cpu, kCuda);
        const std::unique_ptr<Optimizer> on_cpu = make(cpu);
        const std::unique_ptr<Optimizer> on_gpu = make(gpu);
        if (masters) {
          on_cpu->enable_master_weights();
          on_gpu->enable_master_weights();
        }
        for (int s = 0; s < 5; ++s) {
          set_grads_on(cpu, s);
          set_grads_on(gpu, s);
          on_cpu->step();
          on_gpu->step();
        }
        for (size_t i = 0; i < cpu.size(); ++i)
          EXPECT_TRUE(testing::all_close(gpu[i].detach().cpu(), cpu[i].detach(), testing::optim_tolerance(dtype)))
              << "parameter " << i;
        const char* state_name = name == "SGD" ? "momentum_buffer" : name == "AdamW" ? "exp_avg_sq" : "square_avg";
        EXPECT_EQ(on_gpu->state(gpu[0]).at(state_name).device(), kCuda);
      }
    }
  }
}

TEST(CudaOptim, AmpTensorsOnTheCpuDriveAGpuStep) {
  KILN_REQUIRE_CUDA();
  const std::vector<Tensor> params = on_device(testing::make_params(DType::Float32), kCuda);
  optim::Adam adam(params, optim::AdamOptions{.lr = 0.1});
  set_grads_on(params, 0);
  adam.step();
  const Tensor before = params[1].detach().cpu();
  const Tensor inv_scale = full({1}, 0.5, {.dtype = DType::Float32});
  adam.step({.inv_scale = inv_scale, .found_inf = ones({1}, {.dtype = DType::Float32})});
  EXPECT_TRUE(testing::all_equal(params[1].detach().cpu(), before));
  EXPECT_EQ(adam.state(params[1]).at("step").cpu().item<double>(), 1.0);
  adam.step({.inv_scale = inv_scale, .found_inf = zeros({1}, {.dtype = DType::Float32})});
  EXPECT_FALSE(testing::all_equal(params[1].detach().cpu(), before));
  EXPECT_EQ(adam.state(params[1]).at("step").cpu().item<double>(), 2.0);
}

TEST(CudaOptim, UnscaleGradsAnswersPerDevice) {
  KILN_REQUIRE_CUDA();
  std::vector<Tensor> params = testing::make_params(DType::Float32);
  params[1] = on_device({params[1]}, kCuda)[0];
  optim::SGD sgd(params, optim::SGDOptions{.lr = 0.1});
  set_grads_on(params, 0);
  Tensor bad = params[1].grad().clone();
  bad.view({-1}).narrow(0, 2, 1).fill_(std::numeric_limits<double>::infinity());
  params[1].set_grad(bad);
  const std::vector<Tensor> found = sgd.unscale_grads_(full({1}, 0.5, {.dtype = DType::Float32}));
  ASSERT_EQ(found.size(), 2u);
  EXPECT_TRUE(found[0].device().is_cpu());
  EXPECT_EQ(found[0].item<double>(), 0.0);
  EXPECT_EQ(found[1].device(), kCuda);
  EXPECT_EQ(found[1].cpu().item<double>(), 1.0);
}

}  // namespace
}  // namespace kiln
