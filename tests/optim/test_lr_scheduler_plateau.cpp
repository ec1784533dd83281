// ReduceLROnPlateau on metric sequences whose outcome is worked out by hand from the
// rules (better-than test, patience, cooldown, min_lr, eps), in min and max modes with
// rel and abs thresholds; state dicts (best = inf included); errors.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>

#include "optim/reduce_lr_on_plateau.h"
#include "tests/optim/scheduler_test_util.h"
#include "tests/test_util.h"

namespace kiln::optim {
namespace {

// Feeds `metrics` one per epoch and checks group 0's lr after each.
void expect_lrs(ReduceLROnPlateau& scheduler, Optimizer& optimizer, const std::vector<double>& metrics,
                const std::vector<double>& lrs) {
  ASSERT_EQ(metrics.size(), lrs.size());
  for (size_t i = 0; i < metrics.size(); ++i) {
    scheduler.step(metrics[i]);
    ASSERT_EQ(optimizer.param_groups()[0].lr(), lrs[i]) << "epoch " << i + 1 << ", metric " << metrics[i];
    ASSERT_EQ(scheduler.get_last_lr()[0], lrs[i]);
    ASSERT_EQ(scheduler.last_epoch(), static_cast<int64_t>(i + 1));
  }
}

TEST(ReduceLROnPlateau, ReducesAfterMoreThanPatienceBadEpochs) {
  auto opt = sched_test::plain({1.0});
  ReduceLROnPlateau scheduler(*opt, {.factor = 0.5, .patience = 2});
  EXPECT_EQ(scheduler.best(), std::numeric_limits<double>::infinity());
  EXPECT_EQ(scheduler.get_last_lr()[0], 1.0);
  EXPECT_FALSE(opt->param_groups()[0].has("initial_lr"));  // no LRScheduler bookkeeping
  // 10 and 9 improve; three 9s are bad epochs 1, 2, 3 > patience: halve; 8 improves; ...
  expect_lrs(scheduler, *opt, {10, 9, 9, 9, 9, 8, 8, 8, 8}, {1, 1, 1, 1, 0.5, 0.5, 0.5, 0.5, 0.25});
  EXPECT_EQ(scheduler.best(), 8);
}

TEST(ReduceLROnPlateau, DefaultsArePyTorchs) {
  const ReduceLROnPlateauOptions o;
  EXPECT_EQ(o.mode, PlateauMode::Min);
  EXPECT_EQ(o.factor, 0.1);
  EXPECT_EQ(o.patience, 10);
  EXPECT_EQ(o.threshold, 1e-4);
  EXPECT_EQ(o.threshold_mode, ThresholdMode::Rel);
  EXPECT_EQ(o.cooldown, 0);
  EXPECT_EQ(o.eps, 1e-8);
}

TEST(ReduceLROnPlateau, MinModeRelativeThreshold) {
  auto opt = sched_test::plain({1.0});
  ReduceLROnPlateau scheduler(*opt, {.factor = 0.5, .patience = 0, .threshold = 0.1});
  // 9.5 is not below 10 * 0.9; 8.9 is (best 8.9); 8.02 is not below 8.9 * 0.9 = 8.01.
  expect_lrs(scheduler, *opt, {10, 9.5, 8.9, 8.02}, {1, 0.5, 0.5, 0.25});
}

TEST(ReduceLROnPlateau, MinModeAbsoluteThreshold) {
  auto opt = sched_test::plain({1.0});
  ReduceLROnPlateau scheduler(
      *opt, {.factor = 0.5, .patience = 0, .threshold = 0.5, .threshold_mode = ThresholdMode::Abs});
  // 9.6 is not below 10 - 0.5; 9.4 is.
  expect_lrs(scheduler, *opt, {10, 9.6, 9.4}, {1, 0.5, 0.5});
}

TEST(ReduceLROnPlateau, MaxModeRelativeAndAbsolute) {
  {
    auto opt = sched_test::plain({1.0});
    ReduceLROnPlateau scheduler(*opt,
                                {.mode = PlateauMode::Max, .factor = 0.5, .patience = 0, .threshold = 0.1});
    EXPECT_EQ(scheduler.best(), -std::numeric_limits<double>::infinity());
    // 1.05 is not above 1 * 1.1; 1.2 is.
    expect_lrs(scheduler, *opt, {1, 1.05, 1.2}, {1, 0.5, 0.5});
  }
  {
    auto opt = sched_test::plain({1.0});
    ReduceLROnPlateau scheduler(*opt, {.mode = PlateauMode::Max,
                                       .factor = 0.5,
                                       .patience = 0,
                                       .threshold = 0.5,
                                       .threshold_mode = ThresholdMode::Abs});
    // 1.4 is not above 1 + 0.5; 1.6 is; a falling metric is bad in max mode.
    expect_lrs(scheduler, *opt, {1, 1.4, 1.6, 0.5}, {1, 0.5, 0.5, 0.25});
  }
}

TEST(ReduceLROnPlateau, CooldownIgnoresBadEpochs) {
  auto opt = sched_test::plain({1.0});
  ReduceLROnPlateau scheduler(*opt, {.factor = 0.5, .patience = 0, .cooldown = 2});
  // Epoch 2 reduces and starts a 2-epoch cooldown; epochs 3 and 4 are not counted;
  // epoch 5 is bad again and reduces.
  expect_lrs(scheduler, *opt, {10, 11, 11, 11, 11, 11}, {1, 0.5, 0.5, 0.5, 0.25, 0.25});
  EXPECT_TRUE(scheduler.in_cooldown());
}

TEST(ReduceLROnPlateau, MinLrPerGroupBoundsTheReduction) {
  auto opt = sched_test::plain({1.0, 0.1});
  ReduceLROnPlateau scheduler(*opt, {.factor = 0.5, .patience = 0, .min_lr = {0.3, 0.05}});
  const std::vector<std::vector<double>> expected = {{1.0, 0.1}, {0.5, 0.05}, {0.3, 0.05}, {0.3, 0.05}};
  for (size_t i = 0; i < expected.size(); ++i) {
    scheduler.step(static_cast<double>(i));  // rising: every epoch after the first is bad
    EXPECT_EQ(scheduler.get_last_lr(), expected[i]) << "epoch " << i + 1;
  }
}

TEST(ReduceLROnPlateau, ChangesNoLargerThanEpsAreSkipped) {
  auto opt = sched_test::plain({1e-8});
  ReduceLROnPlateau scheduler(*opt, {.patience = 0});
  scheduler.step(1);
  scheduler.step(2);  // would go 1e-8 -> 1e-9: a change of 9e-9 <= eps = 1e-8
  EXPECT_EQ(scheduler.get_last_lr()[0], 1e-8);

  auto opt_no_eps = sched_test::plain({1e-8});
  ReduceLROnPlateau no_eps(*opt_no_eps, {.patience = 0, .eps = 0});
  no_eps.step(1);
  no_eps.step(2);
  EXPECT_EQ(no_eps.get_last_lr()[0], 1e-8 * 0.1);
}

TEST(ReduceLROnPlateau, NanMetricIsABadEpoch) {
  auto opt = sched_test::plain({1.0});
  ReduceLROnPlateau scheduler(*opt, {.factor = 0.5, .patience = 0});
  expect_lrs(scheduler, *opt, {1, std::nan("")}, {1, 0.5});
  EXPECT_EQ(scheduler.best(), 1);
}

TEST(ReduceLROnPlateau, StateDictRoundTripsMidSequence) {
  const std::vector<double> metrics = {5, 4, 4.5, 4.2, 4.1, 4.3, 3.9, 4,   4,
                                       4, 4, 4,   3,   3.5, 3.6, 3.7, 3.8, 3.9};
  for (const size_t split : {size_t{0}, size_t{5}, size_t{9}}) {
    const ReduceLROnPlateauOptions options{.factor = 0.5, .patience = 1, .cooldown = 1, .min_lr = 0.01};
    auto opt = sched_test::plain({1.0, 0.5});
    ReduceLROnPlateau scheduler(*opt, options);
    for (size_t i = 0; i < split; ++i) scheduler.step(metrics[i]);
    const json::Value state = sched_test::through_text(scheduler.state_dict());  // best may be inf

    auto resumed_opt = sched_test::plain({0.9, 0.9});
    ReduceLROnPlateau resumed(*resumed_opt, {.mode = PlateauMode::Max, .patience = 7});
    resumed.load_state_dict(state);
    EXPECT_EQ(resumed.best(), scheduler.best());
    EXPECT_EQ(resumed.get_last_lr(), scheduler.get_last_lr());
    for (size_t i = split; i < metrics.size(); ++i) {
      scheduler.step(metrics[i]);
      resumed.step(metrics[i]);
      ASSERT_EQ(sched_test::group_lrs(*resumed_opt), sched_test::group_lrs(*opt))
          << "split " << split << " epoch " << i;
      ASSERT_EQ(resumed.num_bad_epochs(), scheduler.num_bad_epochs());
      ASSERT_EQ(resumed.cooldown_counter(), scheduler.cooldown_counter());
    }
    EXPECT_LT(scheduler.get_last_lr()[0], 1.0);  // the sequence did reduce
  }
}

TEST(ReduceLROnPlateau, LoadStateDictChecks) {
  auto opt = sched_test::plain({1.0});
  ReduceLROnPlateau scheduler(*opt, {});
  json::Value state = json::parse(json::dump(scheduler.state_dict()));
  auto two = sched_test::plain({1.0, 2.0});
  ReduceLROnPlateau other(*two, {});
  EXPECT_KILN_ERROR(other.load_state_dict(state), "ReduceLROnPlateau", "1 entries", "2 parameter group(s)");
}

TEST(ReduceLROnPlateau, BadArguments) {
  auto opt = sched_test::plain({1.0, 0.5});
  EXPECT_KILN_ERROR(ReduceLROnPlateau(*opt, {.factor = 1.0}), "ReduceLROnPlateau: factor must be in [0, 1)");
  EXPECT_KILN_ERROR(ReduceLROnPlateau(*opt, {.factor = -0.5}), "ReduceLROnPlateau: factor");
  EXPECT_KILN_ERROR(ReduceLROnPlateau(*opt, {.patience = -1}), "ReduceLROnPlateau: patience must be >= 0");
  EXPECT_KILN_ERROR(ReduceLROnPlateau(*opt, {.threshold = -1e-3}),
                    "ReduceLROnPlateau: threshold must be >= 0");
  EXPECT_KILN_ERROR(ReduceLROnPlateau(*opt, {.cooldown = -1}), "ReduceLROnPlateau: cooldown must be >= 0");
  EXPECT_KILN_ERROR(ReduceLROnPlateau(*opt, {.min_lr = {0.1, 0.2, 0.3}}),
                    "ReduceLROnPlateau: expected 2 values for min_lr");
  EXPECT_KILN_ERROR(ReduceLROnPlateau(*opt, {.min_lr = -1.0}), "ReduceLROnPlateau: min_lr must be >= 0");
  EXPECT_KILN_ERROR(ReduceLROnPlateau(*opt, {.eps = -1.0}), "ReduceLROnPlateau: eps must be >= 0");
}

}  // namespace
}  // namespace kiln::optim
