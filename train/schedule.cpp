// make_optimizer and Schedule (train/schedule.h): the configuration's names to optim's
// classes, and each scheduler's step at its granularity.
#include "train/schedule.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "optim/adam.h"
#include "optim/cosine_annealing_lr.h"
#include "optim/cyclic_lr.h"
#include "optim/exponential_lr.h"
#include "optim/linear_lr.h"
#include "optim/multi_step_lr.h"
#include "optim/one_cycle_lr.h"
#include "optim/rmsprop.h"
#include "optim/sgd.h"
#include "optim/step_lr.h"

namespace kiln::train {
namespace {

optim::CyclicMode cyclic_mode(const std::string& name) {
  if (name == "triangular2") return optim::CyclicMode::Triangular2;
  if (name == "exp_range") return optim::CyclicMode::ExpRange;
  return optim::CyclicMode::Triangular;
}

// Momentum cycling needs a momentum to cycle: SGD's or RMSprop's momentum, or Adam's beta1.
bool can_cycle_momentum(const TrainConfig& config) {
  if (!config.cycle_momentum) return false;
  if (config.optimizer == "sgd" || config.optimizer == "rmsprop") return config.momentum > 0;
  return true;
}

std::unique_ptr<optim::LRScheduler> per_epoch_scheduler(const TrainConfig& config,
                                                        optim::Optimizer& optimizer) {
  if (config.scheduler == "step")
    return std::make_unique<optim::StepLR>(
        optimizer, optim::StepLROptions{.step_size = config.step_size, .gamma = config.gamma});
  if (config.scheduler == "multistep")
    return std::make_unique<optim::MultiStepLR>(
        optimizer, optim::MultiStepLROptions{.milestones = milestone_epochs(config.milestones, config.epochs),
                                             .gamma = config.gamma});
  if (config.scheduler == "exponential")
    return std::make_unique<optim::ExponentialLR>(optimizer,
                                                  optim::ExponentialLROptions{.gamma = config.gamma});
  if (config.scheduler == "cosine")
    return std::make_unique<optim::CosineAnnealingLR>(
        optimizer, optim::CosineAnnealingLROptions{.T_max = config.epochs, .eta_min = config.min_lr});
  if (config.scheduler == "linear")
    return std::make_unique<optim::LinearLR>(optimizer, optim::LinearLROptions{.total_iters = config.epochs});
  return nullptr;
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

std::unique_ptr<optim::Optimizer> make_optimizer(const TrainConfig& config, std::vector<Tensor> params) {
  if (config.optimizer == "sgd")
    return std::make_unique<optim::SGD>(std::move(params),
                                        optim::SGDOptions{.lr = config.lr,
                                                          .momentum = config.momentum,
                                                          .weight_decay = config.weight_decay,
                                                          .nesterov = config.nesterov});
  if (config.optimizer == "adam")
    return std::make_unique<optim::Adam>(std::move(params),
                                         optim::AdamOptions{.lr = config.lr,
                                                            .beta1 = config.beta1,
                                                            .beta2 = config.beta2,
                                                            .eps = config.eps,
                                                            .weight_decay = config.weight_decay});
  if (config.optimizer == "adamw")
    return std::make_unique<optim::AdamW>(std::move(params),
                                          optim::AdamWOptions{.lr = config.lr,
                                                              .beta1 = config.beta1,
                                                              .beta2 = config.beta2,
                                                              .eps = config.eps,
                                                              .weight_decay = config.weight_decay});
  if (config.optimizer == "rmsprop")
    return std::make_unique<optim::RMSprop>(std::move(params),
                                            optim::RMSpropOptions{.lr = config.lr,
                                                                  .alpha = config.alpha,
                                                                  .eps = config.eps,
                                                                  .weight_decay = config.weight_decay,
                                                                  .momentum = config.momentum});
  throw Error("unknown optimizer '" + config.optimizer + "' (sgd, adam, adamw or rmsprop)");
}

Schedule::Schedule(const TrainConfig& config, optim::Optimizer& optimizer, int64_t steps_per_epoch,
                   bool higher_is_better)
    : optimizer_(optimizer) {
  const double max_lr = config.max_lr > 0 ? config.max_lr : 10 * config.lr;
  if (config.scheduler == "cyclic") {
    per_step_ = true;
    const bool momentum = can_cycle_momentum(config);
    optim::CyclicLROptions options{
        .base_lr = config.min_lr > 0 ? config.min_lr : config.lr,
        .max_lr = max_lr,
        .step_size_up = config.step_size_up > 0 ? config.step_size_up : steps_per_epoch,
        .mode = cyclic_mode(config.cyclic_mode),
        .gamma = config.gamma,
        .cycle_momentum = momentum};
    if (momentum && config.optimizer != "sgd" && config.optimizer != "rmsprop") {
      options.base_momentum = 0.85;  // Adam's beta1 cycles between these
      options.max_momentum = config.beta1;
    } else if (momentum) {
      options.max_momentum = config.momentum;
      options.base_momentum = 0.85 * config.momentum;
    }
    scheduler_ = std::make_unique<optim::CyclicLR>(optimizer, options);
  } else if (config.scheduler == "onecycle") {
    per_step_ = true;
    scheduler_ = std::make_unique<optim::OneCycleLR>(
        optimizer, optim::OneCycleLROptions{.max_lr = max_lr,
                                            .epochs = config.epochs,
                                            .steps_per_epoch = std::max<int64_t>(1, steps_per_epoch),
                                            .pct_start = config.pct_start,
                                            .cycle_momentum = can_cycle_momentum(config)});
  } else if (config.scheduler == "plateau") {
    plateau_ = std::make_unique<optim::ReduceLROnPlateau>(
        optimizer, optim::ReduceLROnPlateauOptions{
                       .mode = higher_is_better ? optim::PlateauMode::Max : optim::PlateauMode::Min,
                       .factor = config.plateau_factor,
                       .patience = config.plateau_patience,
                       .min_lr = config.min_lr});
  } else {
    scheduler_ = per_epoch_scheduler(config, optimizer);
    KILN_CHECK(scheduler_ != nullptr || config.scheduler == "none", "unknown scheduler '", config.scheduler,
               "'");
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
