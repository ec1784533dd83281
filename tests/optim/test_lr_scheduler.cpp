// StepLR, MultiStepLR, ExponentialLR, CosineAnnealingLR and LinearLR against their
// closed forms written here (PyTorch's _get_closed_form_lr), the LRScheduler step
// convention, state dict round trips mid-sequence, and the errors for bad arguments.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <numbers>

#include "optim/cosine_annealing_lr.h"
#include "optim/exponential_lr.h"
#include "optim/linear_lr.h"
#include "optim/multi_step_lr.h"
#include "optim/step_lr.h"
#include "tests/optim/scheduler_test_util.h"
#include "tests/test_util.h"

namespace kiln::optim {
namespace {

using sched_test::near_rel;

const std::vector<double> kBaseLrs = {0.1, 0.05};

// Steps `scheduler` through epochs 0..epochs-1 and checks every group's lr (in the
// optimizer and in get_last_lr) against closed_form(base_lr, epoch).
void expect_sequence(LRScheduler& scheduler, Optimizer& optimizer, int epochs,
                     const std::function<double(double, int64_t)>& closed_form) {
  for (int64_t epoch = 0; epoch < epochs; ++epoch) {
    if (epoch > 0) scheduler.step();
    ASSERT_EQ(scheduler.last_epoch(), epoch);
    const std::vector<double> lrs = sched_test::group_lrs(optimizer);
    ASSERT_EQ(scheduler.get_last_lr(), lrs);
    for (size_t g = 0; g < lrs.size(); ++g)
      ASSERT_TRUE(near_rel(lrs[g], closed_form(kBaseLrs[g], epoch))) << "group " << g << " epoch " << epoch;
  }
}

TEST(LRScheduler, ConstructorRecordsInitialLrAndTakesTheInitialStep) {
  auto opt = sched_test::plain(kBaseLrs);
  opt->param_groups()[1].set("initial_lr", 0.5);  // kept: only absent ones are recorded
  StepLR scheduler(*opt, {.step_size = 2, .gamma = 0.5});
  EXPECT_EQ(scheduler.last_epoch(), 0);
  EXPECT_EQ(opt->param_groups()[0].get("initial_lr"), 0.1);
  EXPECT_EQ(opt->param_groups()[1].get("initial_lr"), 0.5);
  EXPECT_EQ(scheduler.base_lrs(), (std::vector<double>{0.1, 0.5}));
  EXPECT_EQ(scheduler.get_last_lr(), kBaseLrs);  // StepLR's epoch 0 leaves the lr
  EXPECT_EQ(scheduler.name(), "StepLR");
}

TEST(LRScheduler, StepLRMatchesClosedForm) {
  auto opt = sched_test::plain(kBaseLrs);
  StepLR scheduler(*opt, {.step_size = 3, .gamma = 0.5});
  expect_sequence(scheduler, *opt, 20, [](double base, int64_t t) { return base * std::pow(0.5, t / 3); });
}

TEST(LRScheduler, StepLRDefaultGammaIsATenth) {
  auto opt = sched_test::plain({1.0});
  StepLR scheduler(*opt, {.step_size = 1});
  scheduler.step();
  EXPECT_TRUE(near_rel(scheduler.get_last_lr()[0], 0.1));
}

TEST(LRScheduler, MultiStepLRCountsMilestonesIncludingRepeats) {
  auto opt = sched_test::plain(kBaseLrs);
  const std::vector<int64_t> milestones = {9, 2, 5, 5};
  MultiStepLR scheduler(*opt, {.milestones = milestones, .gamma = 0.1});
  expect_sequence(scheduler, *opt, 15, [&](double base, int64_t t) {
    const auto passed =
        std::count_if(milestones.begin(), milestones.end(), [&](int64_t m) { return m <= t; });
    return base * std::pow(0.1, static_cast<double>(passed));
  });
}

TEST(LRScheduler, ExponentialLRMatchesClosedForm) {
  auto opt = sched_test::plain(kBaseLrs);
  ExponentialLR scheduler(*opt, {.gamma = 0.9});
  expect_sequence(scheduler, *opt, 60, [](double base, int64_t t) { return base * std::pow(0.9, t); });
}

double cosine_closed_form(double base, double eta_min, int64_t t_max, int64_t t) {
  return eta_min + (base - eta_min) * (1 + std::cos(std::numbers::pi * t / t_max)) / 2;
}

TEST(LRScheduler, CosineAnnealingLRMatchesClosedFormPastTMax) {
  for (const double eta_min : {0.0, 0.001}) {
    auto opt = sched_test::plain(kBaseLrs);
    CosineAnnealingLR scheduler(*opt, {.T_max = 10, .eta_min = eta_min});
    // Three half periods: down to eta_min, back up to base_lr, down again.
    expect_sequence(scheduler, *opt, 31,
                    [&](double base, int64_t t) { return cosine_closed_form(base, eta_min, 10, t); });
  }
}

TEST(LRScheduler, CosineAnnealingLRIsPyTorchsRecursion) {
  // PyTorch's get_lr, transcribed: the doubles must be identical, not merely close.
  const double eta_min = 0.002, t_max = 7, base = 0.1;
  auto opt = sched_test::plain({base});
  CosineAnnealingLR scheduler(*opt, {.T_max = 7, .eta_min = eta_min});
  double lr = base;
  const double pi = std::numbers::pi;
  for (int64_t t = 1; t < 40; ++t) {
    if ((t - 1 - 7) % 14 == 0) {
      lr = lr + (base - eta_min) * (1 - std::cos(pi / t_max)) / 2;
    } else {
      lr = (1 + std::cos(pi * t / t_max)) / (1 + std::cos(pi * (t - 1) / t_max)) * (lr - eta_min) + eta_min;
    }
    scheduler.step();
    ASSERT_EQ(scheduler.get_last_lr()[0], lr) << "epoch " << t;
  }
}

TEST(LRScheduler, RecursiveSchedulesCarryAHandSetLr) {
  // Note [Recursive schedules]: the next lr is computed from the group's current one.
  auto opt = sched_test::plain({0.1});
  ExponentialLR scheduler(*opt, {.gamma = 0.5});
  opt->param_groups()[0].set_lr(0.8);
  scheduler.step();
  EXPECT_EQ(scheduler.get_last_lr()[0], 0.4);
}

TEST(LRScheduler, LinearLRMatchesClosedForm) {
  for (const LinearLROptions& options :
       {LinearLROptions{}, LinearLROptions{.start_factor = 0.25, .end_factor = 0.75, .total_iters = 4},
        LinearLROptions{.start_factor = 1.0, .end_factor = 0.0, .total_iters = 6}}) {
    auto opt = sched_test::plain(kBaseLrs);
    LinearLR scheduler(*opt, options);
    expect_sequence(scheduler, *opt, 12, [&](double base, int64_t t) {
      const double done = static_cast<double>(std::min(t, options.total_iters)) / options.total_iters;
      return base * (options.start_factor + (options.end_factor - options.start_factor) * done);
    });
  }
}

TEST(LRScheduler, LinearLRDefaultsArePyTorchs) {
  const LinearLROptions options;
  EXPECT_EQ(options.start_factor, 1.0 / 3);
  EXPECT_EQ(options.end_factor, 1.0);
  EXPECT_EQ(options.total_iters, 5);
}

// Runs `before` steps, saves, builds a fresh optimizer and scheduler (with `make`), loads,
// and checks both continue with identical lrs for `after` steps.
void expect_round_trip(const std::function<std::unique_ptr<LRScheduler>(Optimizer&)>& make, int before,
                       int after) {
  auto opt = sched_test::plain(kBaseLrs);
  std::unique_ptr<LRScheduler> scheduler = make(*opt);
  for (int i = 0; i < before; ++i) scheduler->step();
  const json::Value state = sched_test::through_text(scheduler->state_dict());

  auto resumed_opt = sched_test::plain({0.7, 0.3});  // different lrs: the state must restore them
  std::unique_ptr<LRScheduler> resumed = make(*resumed_opt);
  resumed->load_state_dict(state);
  EXPECT_EQ(resumed->last_epoch(), scheduler->last_epoch());
  EXPECT_EQ(resumed->get_last_lr(), scheduler->get_last_lr());
  EXPECT_EQ(resumed->base_lrs(), scheduler->base_lrs());
  for (int i = 0; i < after; ++i) {
    scheduler->step();
    resumed->step();
    ASSERT_EQ(resumed->get_last_lr(), scheduler->get_last_lr()) << "step " << i << " after the load";
    ASSERT_EQ(sched_test::group_lrs(*resumed_opt), sched_test::group_lrs(*opt));
  }
}

TEST(LRScheduler, StateDictRoundTripsMidSequence) {
  expect_round_trip([](Optimizer& o) { return std::make_unique<StepLR>(o, StepLROptions{.step_size = 3}); },
                    7, 10);
  expect_round_trip(
      [](Optimizer& o) {
        return std::make_unique<MultiStepLR>(o, MultiStepLROptions{.milestones = {3, 8, 12}, .gamma = 0.3});
      },
      5, 12);
  expect_round_trip(
      [](Optimizer& o) { return std::make_unique<ExponentialLR>(o, ExponentialLROptions{.gamma = 0.9}); }, 4,
      10);
  expect_round_trip(
      [](Optimizer& o) {
        return std::make_unique<CosineAnnealingLR>(o, CosineAnnealingLROptions{.T_max = 6, .eta_min = 1e-3});
      },
      5, 15);
  expect_round_trip([](Optimizer& o) { return std::make_unique<LinearLR>(o, LinearLROptions{}); }, 2, 8);
}

TEST(LRScheduler, StateDictRestoresHyperParameters) {
  auto opt = sched_test::plain(kBaseLrs);
  StepLR saved(*opt, {.step_size = 2, .gamma = 0.5});
  auto other_opt = sched_test::plain(kBaseLrs);
  StepLR loaded(*other_opt, {.step_size = 7, .gamma = 0.9});
  loaded.load_state_dict(saved.state_dict());
  EXPECT_EQ(loaded.options().step_size, 2);
  EXPECT_EQ(loaded.options().gamma, 0.5);
}

TEST(LRScheduler, LoadStateDictRejectsMismatchesAndChangesNothing) {
  auto opt = sched_test::plain(kBaseLrs);
  StepLR scheduler(*opt, {.step_size = 2});
  scheduler.step();
  const json::Value good = scheduler.state_dict();

  auto other = sched_test::plain(kBaseLrs);
  ExponentialLR exponential(*other, {.gamma = 0.5});
  EXPECT_KILN_ERROR(exponential.load_state_dict(good), "ExponentialLR", "belongs to a StepLR");

  auto one_group = sched_test::plain({0.1});
  StepLR small(*one_group, {.step_size = 2});
  EXPECT_KILN_ERROR(small.load_state_dict(good), "StepLR", "base_lrs", "2 entries", "1 parameter group");

  json::Value missing =
      json::parse(R"({"scheduler":"StepLR","last_epoch":3,"base_lrs":[1,2],"last_lr":[1,2]})");
  StepLR fresh(*other, {.step_size = 5});
  EXPECT_KILN_ERROR(fresh.load_state_dict(missing), "StepLR", "no field \"step_size\"");
  EXPECT_EQ(fresh.last_epoch(), 0);  // nothing loaded
  EXPECT_EQ(fresh.options().step_size, 5);

  json::Value wrong_type = json::parse(
      R"({"scheduler":"StepLR","last_epoch":"3","base_lrs":[1,2],"last_lr":[1,2],"step_size":2,"gamma":0.1})");
  EXPECT_KILN_ERROR(fresh.load_state_dict(wrong_type), "StepLR",
                    "\"last_epoch\" should be an integer, got a string");
  EXPECT_KILN_ERROR(fresh.load_state_dict(json::Value::array()), "StepLR", "expected a JSON object");
}

TEST(LRScheduler, StepAfterAddParamGroupIsAnError) {
  auto opt = sched_test::plain({0.1});
  StepLR scheduler(*opt, {.step_size = 2});
  opt->add_param_group(ParamGroup{.params = {zeros({3})}, .options = {{"lr", 0.2}}});
  EXPECT_KILN_ERROR(scheduler.step(), "StepLR", "2 parameter group(s)", "built for 1");
}

TEST(LRScheduler, BadArgumentsNameTheScheduler) {
  auto opt = sched_test::plain({0.1});
  EXPECT_KILN_ERROR(StepLR(*opt, {.step_size = 0}), "StepLR: step_size must be positive, got 0");
  EXPECT_KILN_ERROR(StepLR(*opt, {.step_size = 2, .gamma = -0.5}), "StepLR: gamma must be positive");
  EXPECT_KILN_ERROR(MultiStepLR(*opt, {.milestones = {3, -1}}),
                    "MultiStepLR: milestones must be >= 0, got -1");
  EXPECT_KILN_ERROR(ExponentialLR(*opt, {}), "ExponentialLR: gamma must be positive, got 0");
  EXPECT_KILN_ERROR(CosineAnnealingLR(*opt, {.T_max = 0}), "CosineAnnealingLR: T_max must be positive");
  EXPECT_KILN_ERROR(CosineAnnealingLR(*opt, {.T_max = 5, .eta_min = -1}), "CosineAnnealingLR: eta_min");
  EXPECT_KILN_ERROR(LinearLR(*opt, {.start_factor = 0}), "LinearLR: start_factor must be in (0, 1]");
  EXPECT_KILN_ERROR(LinearLR(*opt, {.start_factor = 1.5}), "LinearLR: start_factor");
  EXPECT_KILN_ERROR(LinearLR(*opt, {.end_factor = 1.5}), "LinearLR: end_factor must be in [0, 1]");
  EXPECT_KILN_ERROR(LinearLR(*opt, {.total_iters = 0}), "LinearLR: total_iters must be positive");
}

}  // namespace
}  // namespace kiln::optim
