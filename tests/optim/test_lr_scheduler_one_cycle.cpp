// OneCycleLR against a piecewise reference written here (phase boundaries from the
// PyTorch docs, anneals as start + (end - start) w(pct) with w = (1 - cos(pi pct)) / 2 or
// pct), two- and three-phase, cos and linear, the momentum on "momentum" and Adam's
// "beta1", landmarks (initial, peak, final lr), per-group max_lr, state dicts (a failed
// load changes nothing), errors.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <numbers>

#include "optim/one_cycle_lr.h"
#include "tests/optim/scheduler_test_util.h"
#include "tests/test_util.h"

namespace kiln::optim {
namespace {

using sched_test::near_rel;

struct Expected {
  double lr, momentum;
};

// The reference schedule for one group at step t.
Expected reference(const OneCycleLROptions& o, double max_lr, int64_t total, int64_t t) {
  const double initial = max_lr / o.div_factor, min = initial / o.final_div_factor;
  const double base_m = 0.85, max_m = 0.95;  // the options' defaults, used by every test here
  const auto weight = [&](double pct) {
    return o.anneal_strategy == AnnealStrategy::Cos ? (1 - std::cos(std::numbers::pi * pct)) / 2 : pct;
  };
  const auto between = [&](double from, double to, double begin, double end) {
    const double w = weight((static_cast<double>(t) - begin) / (end - begin));
    return from + (to - from) * w;
  };
  const double rise_end = o.pct_start * total - 1;
  if (t <= rise_end) return {between(initial, max_lr, 0, rise_end), between(max_m, base_m, 0, rise_end)};
  if (!o.three_phase)
    return {between(max_lr, min, rise_end, total - 1), between(base_m, max_m, rise_end, total - 1)};
  const double fall_end = 2 * o.pct_start * total - 2;
  if (t <= fall_end)
    return {between(max_lr, initial, rise_end, fall_end), between(base_m, max_m, rise_end, fall_end)};
  return {between(initial, min, fall_end, total - 1), max_m};
}

void expect_schedule(const OneCycleLROptions& options, int64_t total) {
  const std::vector<double> max_lrs = {0.1, 0.02};
  auto opt = sched_test::sgd_like({1.0, 1.0});
  OneCycleLROptions with_lrs = options;
  with_lrs.max_lr = {max_lrs[0], max_lrs[1]};
  OneCycleLR scheduler(*opt, with_lrs);
  for (int64_t t = 0; t <= total; ++t) {  // PyTorch allows last_epoch == total_steps
    if (t > 0) scheduler.step();
    for (size_t g = 0; g < 2; ++g) {
      const Expected e = reference(options, max_lrs[g], total, t);
      ASSERT_TRUE(near_rel(scheduler.get_last_lr()[g], e.lr)) << "group " << g << " step " << t;
      ASSERT_TRUE(near_rel(opt->param_groups()[g].get("momentum"), e.momentum))
          << "group " << g << " step " << t;
    }
  }
}

TEST(OneCycleLR, TwoPhaseCos) { expect_schedule({.total_steps = 100}, 100); }
TEST(OneCycleLR, TwoPhaseLinear) {
  expect_schedule({.total_steps = 57, .pct_start = 0.4, .anneal_strategy = AnnealStrategy::Linear}, 57);
}
TEST(OneCycleLR, ThreePhaseCos) { expect_schedule({.total_steps = 100, .three_phase = true}, 100); }
TEST(OneCycleLR, ThreePhaseLinear) {
  expect_schedule({.total_steps = 90,
                   .pct_start = 0.25,
                   .anneal_strategy = AnnealStrategy::Linear,
                   .div_factor = 10,
                   .final_div_factor = 100,
                   .three_phase = true},
                  90);
}

TEST(OneCycleLR, Landmarks) {
  auto opt = sched_test::sgd_like({1.0});
  OneCycleLR scheduler(*opt, {.max_lr = 0.5, .total_steps = 10});
  EXPECT_TRUE(near_rel(scheduler.get_last_lr()[0], 0.5 / 25));  // initial_lr = max_lr / div_factor
  EXPECT_TRUE(near_rel(opt->param_groups()[0].get("initial_lr"), 0.5 / 25));
  EXPECT_EQ(opt->param_groups()[0].get("momentum"), 0.95);
  for (int i = 0; i < 2; ++i) scheduler.step();  // step 2 = 0.3 * 10 - 1: the peak
  EXPECT_TRUE(near_rel(scheduler.get_last_lr()[0], 0.5));
  EXPECT_TRUE(near_rel(opt->param_groups()[0].get("momentum"), 0.85));
  for (int i = 0; i < 7; ++i) scheduler.step();  // step 9: the end
  EXPECT_TRUE(near_rel(scheduler.get_last_lr()[0], 0.5 / 25 / 1e4));
  EXPECT_TRUE(near_rel(opt->param_groups()[0].get("momentum"), 0.95));
}

TEST(OneCycleLR, EpochsTimesStepsPerEpoch) {
  auto opt = sched_test::sgd_like({1.0});
  OneCycleLR scheduler(*opt, {.max_lr = 0.5, .epochs = 4, .steps_per_epoch = 7});
  EXPECT_EQ(scheduler.total_steps(), 28);
}

TEST(OneCycleLR, SteppingPastTotalStepsIsAnError) {
  auto opt = sched_test::sgd_like({1.0});
  OneCycleLR scheduler(*opt, {.max_lr = 0.5, .total_steps = 5});
  for (int i = 0; i < 5; ++i) scheduler.step();  // last_epoch 5 == total_steps is allowed
  EXPECT_KILN_ERROR(scheduler.step(), "OneCycleLR: tried to step 6 times; total_steps is 5");
}

TEST(OneCycleLR, DrivesAdamsBeta1) {
  auto opt = sched_test::adam_like({1.0});
  OneCycleLR scheduler(*opt, {.max_lr = 1e-3, .total_steps = 20, .base_momentum = 0.8, .max_momentum = 0.9});
  EXPECT_EQ(opt->param_groups()[0].get("beta1"), 0.9);
  for (int i = 0; i < 5; ++i) scheduler.step();  // step 5 = 0.3 * 20 - 1: the peak
  EXPECT_TRUE(near_rel(opt->param_groups()[0].get("beta1"), 0.8));
  EXPECT_EQ(opt->param_groups()[0].get("beta2"), 0.999);
  EXPECT_FALSE(opt->param_groups()[0].has("momentum"));
}

TEST(OneCycleLR, WithoutCycleMomentumLeavesMomentumAndAcceptsAnyOptimizer) {
  auto opt = sched_test::plain({1.0});
  EXPECT_KILN_ERROR(OneCycleLR(*opt, {.max_lr = 0.1, .total_steps = 10}), "OneCycleLR",
                    "neither \"momentum\" nor \"beta1\"");
  OneCycleLR scheduler(*opt, {.max_lr = 0.1, .total_steps = 10, .cycle_momentum = false});
  scheduler.step();
  EXPECT_FALSE(opt->param_groups()[0].has("momentum"));
}

TEST(OneCycleLR, StateDictRoundTripsMidSequence) {
  const OneCycleLROptions options{.max_lr = {0.1, 0.3}, .total_steps = 40, .three_phase = true};
  auto opt = sched_test::adam_like({1.0, 1.0});
  OneCycleLR scheduler(*opt, options);
  for (int i = 0; i < 17; ++i) scheduler.step();
  const json::Value state = sched_test::through_text(scheduler.state_dict());

  auto resumed_opt = sched_test::adam_like({1.0, 1.0});
  OneCycleLR resumed(*resumed_opt,
                     {.max_lr = 9.0, .total_steps = 1000, .anneal_strategy = AnnealStrategy::Linear});
  resumed.load_state_dict(state);
  EXPECT_EQ(resumed.total_steps(), 40);
  EXPECT_EQ(resumed_opt->param_groups()[1].get("beta1"), opt->param_groups()[1].get("beta1"));
  for (int i = 0; i < 23; ++i) {
    scheduler.step();
    resumed.step();
    ASSERT_EQ(resumed.get_last_lr(), scheduler.get_last_lr()) << "step " << i;
    ASSERT_EQ(resumed_opt->param_groups()[0].get("beta1"), opt->param_groups()[0].get("beta1"));
  }
}

// Note [All-or-nothing loads]: a load ends by restoring the momentum of last_epoch, after
// the commit; a last_epoch the schedule cannot evaluate is refused before anything changes.
TEST(OneCycleLR, LoadingAStepPastTheEndChangesNothing) {
  auto ended_opt = sched_test::sgd_like({1.0});
  OneCycleLR ended(*ended_opt, {.max_lr = 0.1, .total_steps = 5});
  for (int i = 0; i < 5; ++i) ended.step();
  EXPECT_KILN_ERROR(ended.step(), "tried to step 6 times");  // last_epoch is 6 now, as in PyTorch
  const json::Value state = sched_test::through_text(ended.state_dict());

  auto opt = sched_test::sgd_like({1.0});
  OneCycleLR scheduler(*opt, {.max_lr = 0.5, .total_steps = 20});
  for (int i = 0; i < 3; ++i) scheduler.step();
  const std::string before = json::dump(scheduler.state_dict());
  const Options options_before = opt->param_groups()[0].options;
  EXPECT_KILN_ERROR(scheduler.load_state_dict(state), "OneCycleLR: load_state_dict: last_epoch 6",
                    "past total_steps 5");
  EXPECT_EQ(json::dump(scheduler.state_dict()), before);
  EXPECT_EQ(opt->param_groups()[0].options, options_before);
  scheduler.step();
  EXPECT_EQ(scheduler.last_epoch(), 4);
}

TEST(OneCycleLR, BadArguments) {
  auto opt = sched_test::sgd_like({1.0, 1.0});
  EXPECT_KILN_ERROR(OneCycleLR(*opt, {.total_steps = 10}), "OneCycleLR: max_lr is required");
  EXPECT_KILN_ERROR(OneCycleLR(*opt, {.max_lr = 0.1}), "OneCycleLR: give either total_steps or both epochs");
  EXPECT_KILN_ERROR(OneCycleLR(*opt, {.max_lr = 0.1, .epochs = 3}), "OneCycleLR: give either total_steps");
  EXPECT_KILN_ERROR(OneCycleLR(*opt, {.max_lr = 0.1, .total_steps = 0}),
                    "OneCycleLR: total_steps must be positive");
  EXPECT_KILN_ERROR(OneCycleLR(*opt, {.max_lr = 0.1, .epochs = 2, .steps_per_epoch = -1}),
                    "OneCycleLR: steps_per_epoch must be positive");
  EXPECT_KILN_ERROR(OneCycleLR(*opt, {.max_lr = 0.1, .total_steps = 10, .pct_start = 1.5}),
                    "OneCycleLR: pct_start must be in [0, 1], got 1.5");
  EXPECT_KILN_ERROR(OneCycleLR(*opt, {.max_lr = {0.1, 0.2, 0.3}, .total_steps = 10}),
                    "OneCycleLR: expected 2 values for max_lr");
  EXPECT_KILN_ERROR(OneCycleLR(*opt, {.max_lr = 0.1, .total_steps = 10, .div_factor = 0}),
                    "OneCycleLR: div_factor must be positive");
  // pct_start * total_steps == 1: the rising phase has no steps (PyTorch divides by zero).
  EXPECT_KILN_ERROR(OneCycleLR(*opt, {.max_lr = 0.1, .total_steps = 10, .pct_start = 0.1}),
                    "OneCycleLR: phase 1 of the schedule has no steps");
}

}  // namespace
}  // namespace kiln::optim
