// Schedule (train/schedule.h): the configuration's scheduler as optim's classes, and each
// scheduler's step at its granularity.
#include "train/schedule.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "optim/cosine_annealing_lr.h"
#include "optim/cyclic_lr.h"
#include "optim/exponential_lr.h"
#include "optim/linear_lr.h"
#include "optim/multi_step_lr.h"
#include "optim/one_cycle_lr.h"
#include "optim/step_lr.h"

namespace kiln::train {
namespace {

// Momentum cycling needs a momentum to cycle: SGD's or RMSprop's momentum, or Adam's beta1.
bool has_momentum_of_its_own(Optimizer optimizer) {
  return optimizer == Optimizer::Sgd || optimizer == Optimizer::RMSprop;
}

bool can_cycle_momentum(const TrainConfig& config, Optimizer optimizer) {
  if (!config.cycle_momentum) return false;
  if (has_momentum_of_its_own(optimizer)) return config.momentum > 0;
  return true;
}

std::unique_ptr<optim::LRScheduler> per_epoch_scheduler(const TrainConfig& config, Scheduler scheduler,
                                                        optim::Optimizer& optimizer) {
  switch (scheduler) {
    case Scheduler::Step:
      return std::make_unique<optim::StepLR>(
          optimizer, optim::StepLROptions{.step_size = config.step_size, .gamma = config.gamma});
    case Scheduler::MultiStep:
      return std::make_unique<optim::MultiStepLR>(
          optimizer, optim::MultiStepLROptions{.milestones = milestone_epochs(config.milestones, config.epochs),
                                               .gamma = config.gamma});
    case Scheduler::Exponential:
      return std::make_unique<optim::ExponentialLR>(optimizer, optim::ExponentialLROptions{.gamma = config.gamma});
    case Scheduler::Cosine:
      return std::make_unique<optim::CosineAnnealingLR>(
          optimizer, optim::CosineAnnealingLROptions{.T_max = config.epochs, .eta_min = config.min_lr});
    case Scheduler::Linear:
      return std::make_unique<optim::LinearLR>(optimizer, optim::LinearLROptions{.total_iters = config.epochs});
    case Scheduler::None:
    case Scheduler::Cyclic:
    case Scheduler::OneCycle:
    case Scheduler::Plateau: return nullptr;
  }
  return nullptr;
}

std::unique_ptr<optim::LRScheduler> cyclic(const TrainConfig& config, Optimizer optimizer_choice,
                                           optim::CyclicMode mode, optim::Optimizer& optimizer,
                                           int64_t steps_per_epoch) {
  const bool momentum = can_cycle_momentum(config, optimizer_choice);
  optim::CyclicLROptions options{.base_lr = config.min_lr > 0 ? config.min_lr : config.lr,
                                 .max_lr = config.max_lr > 0 ? config.max_lr : 10 * config.lr,
                                 .step_size_up = config.step_size_up > 0 ? config.step_size_up : steps_per_epoch,
                                 .mode = mode,
                                 .gamma = config.gamma,
                                 .cycle_momentum = momentum};
  if (momentum && !has_momentum_of_its_own(optimizer_choice)) {
    options.base_momentum = 0.85;  // Adam's beta1 cycles between these
    options.max_momentum = config.beta1;
  } else if (momentum) {
    options.max_momentum = config.momentum;
    options.base_momentum = 0.85 * config.momentum;
  }
  return std::make_unique<optim::CyclicLR>(optimizer, options);
}

}  // namespace

std::vector<int64_t> milestone_epochs(const std::vector<double>& milestones, int64_t epochs) {
  const bool fractions = !milestones.empty() &&
                         std::all_of(milestones.begin(), milestones.end(), [](double m) { return m < 1; });
  std::vector<int64_t> result;
  for (const double milestone : milestones) {
    result.push_back(fractions ? static_cast<int64_t>(std::floor(milestone * static_cast<double>(epochs)))
                               : static_cast<int64_t>(std::llround(milestone)));
  }
  return result;
}

bool schedule_depends_on_epochs(Scheduler scheduler, const std::vector<double>& milestones) {
  switch (scheduler) {
    case Scheduler::OneCycle:
    case Scheduler::Cosine:
    case Scheduler::Linear: return true;
    case Scheduler::MultiStep:
      return !milestones.empty() && std::all_of(milestones.begin(), milestones.end(), [](double m) { return m < 1; });
    case Scheduler::None:
    case Scheduler::Step:
    case Scheduler::Exponential:
    case Scheduler::Cyclic:
    case Scheduler::Plateau: return false;
  }
  return false;
}

Schedule::Schedule(const TrainConfig& config, optim::Optimizer& optimizer, int64_t steps_per_epoch,
                   bool higher_is_better)
    : Schedule(config, validate(config), optimizer, steps_per_epoch, higher_is_better) {}

Schedule::Schedule(const TrainConfig& config, const Choices& choices, optim::Optimizer& optimizer,
                   int64_t steps_per_epoch, bool higher_is_better)
    : optimizer_(optimizer) {
  switch (choices.scheduler) {
    case Scheduler::Cyclic:
      per_step_ = true;
      scheduler_ = cyclic(config, choices.optimizer, choices.cyclic_mode, optimizer, steps_per_epoch);
      break;
    case Scheduler::OneCycle:
      per_step_ = true;
      scheduler_ = std::make_unique<optim::OneCycleLR>(
          optimizer, optim::OneCycleLROptions{.max_lr = config.max_lr > 0 ? config.max_lr : 10 * config.lr,
                                              .epochs = config.epochs,
                                              .steps_per_epoch = std::max<int64_t>(1, steps_per_epoch),
                                              .pct_start = config.pct_start,
                                              .cycle_momentum = can_cycle_momentum(config, choices.optimizer)});
      break;
    case Scheduler::Plateau:
      plateau_ = std::make_unique<optim::ReduceLROnPlateau>(
          optimizer, optim::ReduceLROnPlateauOptions{
                         .mode = higher_is_better ? optim::PlateauMode::Max : optim::PlateauMode::Min,
                         .factor = config.plateau_factor,
                         .patience = config.plateau_patience,
                         .min_lr = config.min_lr});
      break;
    default: scheduler_ = per_epoch_scheduler(config, choices.scheduler, optimizer);
  }
}

void Schedule::after_step() {
  if (scheduler_ && per_step_) scheduler_->step();
}

void Schedule::after_epoch() {
  if (scheduler_ && !per_step_) scheduler_->step();
}

void Schedule::after_validation(double metric) {
  if (plateau_ && std::isfinite(metric)) plateau_->step(metric);
}

double Schedule::lr() const { return optimizer_.param_groups().at(0).lr(); }

json::Value Schedule::state_dict() const {
  if (scheduler_) return scheduler_->state_dict();
  if (plateau_) return plateau_->state_dict();
  return {};
}

void Schedule::load_state_dict(const json::Value& state) {
  if (scheduler_)
    scheduler_->load_state_dict(state);
  else if (plateau_)
    plateau_->load_state_dict(state);
  else
    KILN_CHECK(state.is(json::Type::Null), "checkpoint: it holds a scheduler's state but this run has none");
}

}  // namespace kiln::train
