// The learning-rate schedule of a run, from its configuration, stepped at the granularity
// each scheduler expects:
//
//   per batch (optimizer step)  cyclic (CyclicLR, momentum cycling included), onecycle
//   per epoch                   step, multistep, exponential, cosine, linear
//   per validation              plateau (ReduceLROnPlateau on the monitored metric)
//
//   auto optimizer = train::make_optimizer(config, choices.optimizer, model.parameters());
//   train::Schedule schedule(config, choices, *optimizer, steps_per_epoch, higher_is_better);
//   ... after each optimizer step: schedule.after_step(); after each epoch:
//   schedule.after_epoch(); after each validation: schedule.after_validation(metric);
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/json.h"
#include "optim/lr_scheduler.h"
#include "optim/optimizer.h"
#include "optim/reduce_lr_on_plateau.h"
#include "train/config.h"

namespace kiln::train {

class Schedule {
 public:
  // steps_per_epoch: optimizer steps per epoch (cyclic's default half-cycle, onecycle's
  // length). `higher_is_better`: the monitored metric's direction, for plateau.
  Schedule(const TrainConfig& config, const Choices& choices, optim::Optimizer& optimizer,
           int64_t steps_per_epoch, bool higher_is_better);
  // The same, validating `config` for its choices (for code that has not).
  Schedule(const TrainConfig& config, optim::Optimizer& optimizer, int64_t steps_per_epoch,
           bool higher_is_better);

  void after_step();
  void after_epoch();
  void after_validation(double metric);
  // The first group's learning rate now.
  double lr() const;

  json::Value state_dict() const;  // null when there is no scheduler
  void load_state_dict(const json::Value& state);

 private:
  optim::Optimizer& optimizer_;
  bool per_step_ = false;
  std::unique_ptr<optim::LRScheduler> scheduler_;
  std::unique_ptr<optim::ReduceLROnPlateau> plateau_;
};

// multistep's milestones in epochs: as given, or fractions of `epochs` when all are below 1
// (the MedMNIST recipe's 50% and 75%).
std::vector<int64_t> milestone_epochs(const std::vector<double>& milestones, int64_t epochs);

// Whether the schedule is laid out over the run's epochs, so that a run resumed with
// another --epochs would follow another schedule: onecycle (its total steps), cosine and
// linear (their T), multistep with milestones given as fractions of the epochs.
bool schedule_depends_on_epochs(Scheduler scheduler, const std::vector<double>& milestones);

}  // namespace kiln::train
