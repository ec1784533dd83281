// CyclicLR against a triangle wave written here with integer step arithmetic (position
// in the cycle, cycle index), for triangular, triangular2 (the 800-step run with
// its halving amplitude), exp_range and custom scale functions; the inverse momentum
// cycle on "momentum" and on Adam's "beta1"; state dicts; errors.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>

#include "optim/cyclic_lr.h"
#include "tests/optim/scheduler_test_util.h"
#include "tests/test_util.h"

namespace kiln::optim {
namespace {

using sched_test::near_rel;

// The triangle's height in [0, 1] at step t, and the 1-based cycle index.
struct Wave {
  int64_t up, down;
  double height(int64_t t) const {
    const int64_t pos = t % (up + down);
    return pos <= up ? static_cast<double>(pos) / up : static_cast<double>(up + down - pos) / down;
  }
  int64_t cycle(int64_t t) const { return t / (up + down) + 1; }
};

TEST(CyclicLR, Triangular2HalvesTheAmplitudeEveryCycle) {
  // The run: base 1e-4, max 1e-3, 50 steps up and 50 down, 800 steps.
  const double base = 1e-4, max = 1e-3;
  auto opt = sched_test::sgd_like({0.5});
  CyclicLR scheduler(*opt, {.base_lr = base,
                            .max_lr = max,
                            .step_size_up = 50,
                            .step_size_down = 50,
                            .mode = CyclicMode::Triangular2,
                            .cycle_momentum = false});
  const Wave wave{50, 50};
  for (int64_t t = 0; t < 800; ++t) {
    if (t > 0) scheduler.step();
    const double lr = scheduler.get_last_lr()[0];
    ASSERT_EQ(opt->param_groups()[0].lr(), lr);
    const double amplitude = (max - base) / std::pow(2.0, static_cast<double>(wave.cycle(t) - 1));
    ASSERT_TRUE(near_rel(lr, base + amplitude * wave.height(t))) << "step " << t;
    if (t % 100 == 50) {  // the peak of cycle t / 100 + 1: max - base halves each time
      EXPECT_TRUE(near_rel(lr - base, (max - base) / std::pow(2.0, static_cast<double>(t / 100)), 1e-10))
          << "peak at step " << t;
    }
    if (t % 100 == 0) {
      EXPECT_TRUE(near_rel(lr, base)) << "trough at step " << t;
    }
  }
  EXPECT_EQ(opt->param_groups()[0].get("momentum"), 0.9);  // untouched without cycle_momentum
}

TEST(CyclicLR, TriangularWithUnevenSidesAndTwoGroups) {
  const std::vector<double> bases = {0.01, 0.002}, maxes = {0.1, 0.05};
  auto opt = sched_test::sgd_like({1.0, 1.0});
  CyclicLR scheduler(*opt, {.base_lr = {bases[0], bases[1]},
                            .max_lr = {maxes[0], maxes[1]},
                            .step_size_up = 3,
                            .step_size_down = 7,
                            .cycle_momentum = false});
  EXPECT_EQ(scheduler.base_lrs(), bases);
  EXPECT_EQ(opt->param_groups()[0].get("initial_lr"), bases[0]);  // lr was set to base_lr first
  const Wave wave{3, 7};
  for (int64_t t = 0; t < 45; ++t) {
    if (t > 0) scheduler.step();
    for (size_t g = 0; g < 2; ++g)
      ASSERT_TRUE(near_rel(scheduler.get_last_lr()[g], bases[g] + (maxes[g] - bases[g]) * wave.height(t)))
          << "group " << g << " step " << t;
  }
}

TEST(CyclicLR, StepSizeDownDefaultsToUp) {
  auto opt = sched_test::sgd_like({1.0});
  CyclicLR scheduler(*opt, {.base_lr = 0.0, .max_lr = 1.0, .step_size_up = 4, .cycle_momentum = false});
  const Wave wave{4, 4};
  for (int64_t t = 1; t < 20; ++t) {
    scheduler.step();
    ASSERT_TRUE(near_rel(scheduler.get_last_lr()[0], wave.height(t))) << "step " << t;
  }
}

TEST(CyclicLR, ExpRangeScalesByGammaToTheStep) {
  const double base = 1e-4, max = 1e-3, gamma = 0.99;
  auto opt = sched_test::sgd_like({1.0});
  CyclicLR scheduler(*opt, {.base_lr = base,
                            .max_lr = max,
                            .step_size_up = 20,
                            .mode = CyclicMode::ExpRange,
                            .gamma = gamma,
                            .cycle_momentum = false});
  const Wave wave{20, 20};
  for (int64_t t = 1; t < 300; ++t) {
    scheduler.step();
    ASSERT_TRUE(
        near_rel(scheduler.get_last_lr()[0], base + (max - base) * wave.height(t) * std::pow(gamma, t)))
        << "step " << t;
  }
}

TEST(CyclicLR, CustomScaleFnByCycleAndByIteration) {
  const double base = 0.1, max = 0.5;
  const Wave wave{5, 5};
  for (const ScaleMode scale_mode : {ScaleMode::Cycle, ScaleMode::Iterations}) {
    auto scale = [](double x) { return 1.0 / (1.0 + 0.1 * x); };
    auto opt = sched_test::sgd_like({1.0});
    CyclicLR scheduler(*opt, {.base_lr = base,
                              .max_lr = max,
                              .step_size_up = 5,
                              .mode = CyclicMode::Triangular2,  // ignored: scale_fn wins
                              .scale_fn = scale,
                              .scale_mode = scale_mode,
                              .cycle_momentum = false});
    for (int64_t t = 1; t < 40; ++t) {
      scheduler.step();
      const double x =
          scale_mode == ScaleMode::Cycle ? static_cast<double>(wave.cycle(t)) : static_cast<double>(t);
      ASSERT_TRUE(near_rel(scheduler.get_last_lr()[0], base + (max - base) * wave.height(t) * scale(x)))
          << "step " << t;
    }
  }
}

TEST(CyclicLR, MomentumCyclesInverselyToLr) {
  const double base = 0.01, max = 0.1, base_m = 0.8, max_m = 0.9;
  auto opt = sched_test::sgd_like({1.0});
  CyclicLR scheduler(*opt,
                     {.base_lr = base, .max_lr = max, .step_size_up = 4, .mode = CyclicMode::Triangular2});
  const Wave wave{4, 4};
  for (int64_t t = 0; t < 30; ++t) {
    if (t > 0) scheduler.step();
    const double scale = 1 / std::pow(2.0, static_cast<double>(wave.cycle(t) - 1));
    const double momentum = opt->param_groups()[0].get("momentum");
    ASSERT_TRUE(near_rel(momentum, max_m - (max_m - base_m) * wave.height(t) * scale)) << "step " << t;
    // Inverse: where lr is at its fraction h of the way up, momentum is h of the way down.
    const double lr_fraction = (scheduler.get_last_lr()[0] - base) / (max - base);
    ASSERT_TRUE(near_rel((max_m - momentum) / (max_m - base_m), lr_fraction, 1e-9)) << "step " << t;
  }
}

TEST(CyclicLR, DrivesAdamsBeta1AndLeavesBeta2) {
  auto opt = sched_test::adam_like({1.0});
  CyclicLR scheduler(
      *opt,
      {.base_lr = 1e-4, .max_lr = 1e-3, .step_size_up = 10, .base_momentum = 0.85, .max_momentum = 0.95});
  EXPECT_EQ(opt->param_groups()[0].get("beta1"), 0.95);  // step 0: the trough of the lr
  EXPECT_FALSE(opt->param_groups()[0].has("momentum"));
  const Wave wave{10, 10};
  for (int64_t t = 1; t < 35; ++t) {
    scheduler.step();
    ASSERT_TRUE(near_rel(opt->param_groups()[0].get("beta1"), 0.95 - 0.1 * wave.height(t))) << "step " << t;
    ASSERT_EQ(opt->param_groups()[0].get("beta2"), 0.999);
  }
}

TEST(CyclicLR, CycleMomentumNeedsMomentumOrBeta1) {
  auto opt = sched_test::plain({1.0});
  EXPECT_KILN_ERROR(CyclicLR(*opt, {.base_lr = 0.1, .max_lr = 1.0}), "CyclicLR",
                    "neither \"momentum\" nor \"beta1\"", "cycle_momentum = false");
  CyclicLR without(*opt, {.base_lr = 0.1, .max_lr = 1.0, .cycle_momentum = false});
  EXPECT_EQ(without.get_last_lr()[0], 0.1);
}

TEST(CyclicLR, MaxLrBelowBaseLrPointsTheTriangleDown) {
  auto opt = sched_test::sgd_like({1.0});
  CyclicLR scheduler(*opt, {.base_lr = 0.5, .max_lr = 0.1, .step_size_up = 2, .cycle_momentum = false});
  scheduler.step();
  scheduler.step();
  EXPECT_TRUE(near_rel(scheduler.get_last_lr()[0], 0.1));
}

TEST(CyclicLR, StateDictRoundTripsMidSequence) {
  for (const CyclicMode mode : {CyclicMode::Triangular, CyclicMode::Triangular2, CyclicMode::ExpRange}) {
    const CyclicLROptions options{.base_lr = {1e-4, 1e-3},
                                  .max_lr = {1e-3, 1e-2},
                                  .step_size_up = 5,
                                  .step_size_down = 3,
                                  .mode = mode,
                                  .gamma = 0.97};
    auto opt = sched_test::sgd_like({1.0, 1.0});
    CyclicLR scheduler(*opt, options);
    for (int i = 0; i < 13; ++i) scheduler.step();
    const json::Value state = sched_test::through_text(scheduler.state_dict());

    auto resumed_opt = sched_test::sgd_like({1.0, 1.0});
    CyclicLR resumed(*resumed_opt, {.base_lr = 0.5, .max_lr = 0.6, .step_size_up = 100});
    resumed.load_state_dict(state);
    EXPECT_EQ(resumed_opt->param_groups()[1].get("momentum"), opt->param_groups()[1].get("momentum"));
    for (int i = 0; i < 20; ++i) {
      scheduler.step();
      resumed.step();
      ASSERT_EQ(resumed.get_last_lr(), scheduler.get_last_lr()) << "step " << i;
      ASSERT_EQ(resumed_opt->param_groups()[0].get("momentum"), opt->param_groups()[0].get("momentum"));
    }
  }
}

TEST(CyclicLR, CustomScaleFnIsNotSerialised) {
  auto scale = [](double x) { return 1.0 / x; };
  auto opt = sched_test::sgd_like({1.0});
  CyclicLR custom(*opt, {.base_lr = 0.1, .max_lr = 1.0, .step_size_up = 3, .scale_fn = scale});
  for (int i = 0; i < 7; ++i) custom.step();
  const json::Value state = sched_test::through_text(custom.state_dict());

  auto plain_opt = sched_test::sgd_like({1.0});
  CyclicLR built_in(*plain_opt, {.base_lr = 0.1, .max_lr = 1.0, .step_size_up = 3});
  EXPECT_KILN_ERROR(built_in.load_state_dict(state), "CyclicLR", "custom scale_fn", "cannot be serialised");
  EXPECT_EQ(built_in.last_epoch(), 0);

  auto same_opt = sched_test::sgd_like({1.0});
  CyclicLR same(*same_opt, {.base_lr = 0.1, .max_lr = 1.0, .step_size_up = 3, .scale_fn = scale});
  same.load_state_dict(state);
  custom.step();
  same.step();
  EXPECT_EQ(same.get_last_lr(), custom.get_last_lr());
}

TEST(CyclicLR, BadArguments) {
  auto opt = sched_test::sgd_like({1.0, 1.0});
  EXPECT_KILN_ERROR(CyclicLR(*opt, {.max_lr = 1.0}), "CyclicLR: base_lr is required");
  EXPECT_KILN_ERROR(CyclicLR(*opt, {.base_lr = 0.1}), "CyclicLR: max_lr is required");
  EXPECT_KILN_ERROR(CyclicLR(*opt, {.base_lr = {0.1, 0.2, 0.3}, .max_lr = 1.0}),
                    "CyclicLR: expected 2 values for base_lr", "got 3");
  EXPECT_KILN_ERROR(CyclicLR(*opt, {.base_lr = 0.1, .max_lr = 1.0, .step_size_up = 0}),
                    "CyclicLR: step_size_up must be positive");
  EXPECT_KILN_ERROR(CyclicLR(*opt, {.base_lr = 0.1, .max_lr = 1.0, .step_size_down = -2}),
                    "CyclicLR: step_size_down must be >= 0");
  EXPECT_KILN_ERROR(CyclicLR(*opt, {.base_lr = -0.1, .max_lr = 1.0}), "CyclicLR: base_lr must be >= 0");
  EXPECT_KILN_ERROR(CyclicLR(*opt, {.base_lr = 0.1, .max_lr = 1.0, .mode = CyclicMode::ExpRange, .gamma = 0}),
                    "CyclicLR: gamma must be positive");
}

}  // namespace
}  // namespace kiln::optim
