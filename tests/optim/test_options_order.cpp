// The optim options structs list their members in the order of the matching torch.optim
// (or torch.amp) class's arguments, Kiln's own after them (tests/core/test_options_structs.cpp
// says why): each is spelled out here in PyTorch's order, which compiles only while the
// declaration agrees.
#include <gtest/gtest.h>

#include "optim/optim.h"

namespace kiln::optim {
namespace {

TEST(OptimOptionsOrder, OptimizersFollowPyTorchsArguments) {
  // SGD(params, lr, momentum, dampening, weight_decay, nesterov, *, maximize)
  const SGDOptions sgd{.lr = 0.1,
                       .momentum = 0.9,
                       .dampening = 0.1,
                       .weight_decay = 1e-4,
                       .nesterov = false,
                       .maximize = true};
  // Adam / AdamW(params, lr, betas, eps, weight_decay, amsgrad, *, maximize)
  const AdamOptions adam{.lr = 0.1,
                         .beta1 = 0.8,
                         .beta2 = 0.9,
                         .eps = 1e-6,
                         .weight_decay = 1e-4,
                         .amsgrad = true,
                         .maximize = true};
  const AdamWOptions adamw{.lr = 0.1,
                           .beta1 = 0.8,
                           .beta2 = 0.9,
                           .eps = 1e-6,
                           .weight_decay = 1e-4,
                           .amsgrad = true,
                           .maximize = true};
  // RMSprop(params, lr, alpha, eps, weight_decay, momentum, centered, ..., maximize)
  const RMSpropOptions rmsprop{.lr = 0.1,
                               .alpha = 0.9,
                               .eps = 1e-6,
                               .weight_decay = 1e-4,
                               .momentum = 0.5,
                               .centered = true,
                               .maximize = true};
  // torch.amp.GradScaler(device, init_scale, growth_factor, backoff_factor, growth_interval,
  // enabled), then Kiln's min_scale
  const GradScalerOptions scaler{.init_scale = 1024.0,
                                 .growth_factor = 4.0,
                                 .backoff_factor = 0.25,
                                 .growth_interval = 10,
                                 .enabled = false,
                                 .min_scale = 1.0};
  EXPECT_TRUE(sgd.maximize && adam.maximize && adamw.maximize && rmsprop.maximize);
  EXPECT_EQ(scaler.min_scale, 1.0);
}

TEST(OptimOptionsOrder, SchedulersFollowPyTorchsArguments) {
  // StepLR(optimizer, step_size, gamma); MultiStepLR(optimizer, milestones, gamma);
  // ExponentialLR(optimizer, gamma); CosineAnnealingLR(optimizer, T_max, eta_min);
  // LinearLR(optimizer, start_factor, end_factor, total_iters)
  const StepLROptions step{.step_size = 3, .gamma = 0.5};
  const MultiStepLROptions multi_step{.milestones = {2, 4}, .gamma = 0.5};
  const ExponentialLROptions exponential{.gamma = 0.5};
  const CosineAnnealingLROptions cosine{.T_max = 10, .eta_min = 0.01};
  const LinearLROptions linear{.start_factor = 0.5, .end_factor = 0.9, .total_iters = 4};
  // OneCycleLR(optimizer, max_lr, total_steps, epochs, steps_per_epoch, pct_start,
  // anneal_strategy, cycle_momentum, base_momentum, max_momentum, div_factor,
  // final_div_factor, three_phase)
  const OneCycleLROptions one_cycle{.max_lr = 0.1,
                                    .total_steps = std::nullopt,
                                    .epochs = 2,
                                    .steps_per_epoch = 5,
                                    .pct_start = 0.25,
                                    .anneal_strategy = AnnealStrategy::Linear,
                                    .cycle_momentum = false,
                                    .base_momentum = 0.8,
                                    .max_momentum = 0.9,
                                    .div_factor = 10,
                                    .final_div_factor = 100,
                                    .three_phase = true};
  // CyclicLR(optimizer, base_lr, max_lr, step_size_up, step_size_down, mode, gamma,
  // scale_fn, scale_mode, cycle_momentum, base_momentum, max_momentum)
  const CyclicLROptions cyclic{.base_lr = 0.01,
                               .max_lr = 0.1,
                               .step_size_up = 4,
                               .step_size_down = 2,
                               .mode = CyclicMode::ExpRange,
                               .gamma = 0.9,
                               .scale_fn = nullptr,
                               .scale_mode = ScaleMode::Iterations,
                               .cycle_momentum = false,
                               .base_momentum = 0.7,
                               .max_momentum = 0.8};
  // ReduceLROnPlateau(optimizer, mode, factor, patience, threshold, threshold_mode,
  // cooldown, min_lr, eps)
  const ReduceLROnPlateauOptions plateau{.mode = PlateauMode::Max,
                                         .factor = 0.5,
                                         .patience = 2,
                                         .threshold = 1e-3,
                                         .threshold_mode = ThresholdMode::Abs,
                                         .cooldown = 1,
                                         .min_lr = 1e-5,
                                         .eps = 1e-9};
  EXPECT_EQ(step.gamma + multi_step.gamma + exponential.gamma, 1.5);
  EXPECT_EQ(cosine.eta_min, 0.01);
  EXPECT_EQ(linear.total_iters, 4);
  EXPECT_TRUE(one_cycle.three_phase);
  EXPECT_EQ(cyclic.scale_mode, ScaleMode::Iterations);
  EXPECT_EQ(plateau.eps, 1e-9);
}

}  // namespace
}  // namespace kiln::optim
