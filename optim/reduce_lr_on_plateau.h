// ReduceLROnPlateau: lowers every group's lr by `factor` when a metric (a validation
// loss, an accuracy) has stopped improving for `patience` epochs, as
// torch.optim.lr_scheduler.ReduceLROnPlateau.
//
// step(metric) once per epoch:
//   - the metric is better than `best` if, in mode min, metric < best (1 - threshold)
//     (threshold_mode rel) or metric < best - threshold (abs); in mode max, metric >
//     best (1 + threshold) or metric > best + threshold. Better: best = metric and the
//     bad-epoch count restarts, else it grows by one. best starts at +inf (min) / -inf (max).
//   - during cooldown (the `cooldown` epochs after a reduction) bad epochs are not counted.
//   - more than `patience` bad epochs: every group's lr becomes max(lr factor, min_lr),
//     unless that changes it by eps or less; the cooldown starts and the count restarts.
//
// It is driven by a metric, not by the epoch alone, so it is not an LRScheduler (PyTorch
// makes it a subclass only nominally): it records no "initial_lr" and takes no initial
// step; last_epoch counts step() calls from 0. state_dict / load_state_dict follow Note
// [Scheduler state dicts] in optim/lr_scheduler.h (load_state_dict writes last_lr back
// into the groups, since each reduction starts from the group's current lr).
//
// Options in PyTorch's order, as designated initializers:
//   ReduceLROnPlateau plateau(optimizer, ReduceLROnPlateauOptions{.mode = PlateauMode::Max, .patience = 3});
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/json.h"
#include "optim/lr_scheduler.h"
#include "optim/optimizer.h"

namespace kiln::optim {

enum class PlateauMode { Min, Max };
enum class ThresholdMode { Rel, Abs };

struct ReduceLROnPlateauOptions {
  PlateauMode mode = PlateauMode::Min;  // Min: lower is better (a loss); Max: higher (accuracy)
  double factor = 0.1;                  // in [0, 1): new_lr = lr * factor
  int64_t patience = 10;                // >= 0 bad epochs tolerated
  double threshold = 1e-4;              // >= 0: how much better counts as better
  ThresholdMode threshold_mode = ThresholdMode::Rel;
  int64_t cooldown = 0;      // >= 0 epochs after a reduction with no counting
  GroupValues min_lr = 0.0;  // >= 0: one value or one per group
  double eps = 1e-8;         // >= 0: smaller changes are not applied
};

class ReduceLROnPlateau {
 public:
  ReduceLROnPlateau(Optimizer& optimizer, const ReduceLROnPlateauOptions& options = {});

  // One epoch's metric. A NaN metric is never better (it counts as a bad epoch).
  void step(double metric);

  // The groups' lrs after the last step() (at construction: their lrs then).
  const std::vector<double>& get_last_lr() const { return last_lr_; }
  int64_t last_epoch() const { return last_epoch_; }
  double best() const { return best_; }
  int64_t num_bad_epochs() const { return num_bad_epochs_; }
  int64_t cooldown_counter() const { return cooldown_counter_; }
  bool in_cooldown() const { return cooldown_counter_ > 0; }

  json::Value state_dict() const;
  void load_state_dict(const json::Value& state);
  const std::string& name() const { return name_; }

 private:
  bool is_better(double metric) const;
  void reduce_lrs();

  std::string name_ = "ReduceLROnPlateau";
  Optimizer& optimizer_;
  ReduceLROnPlateauOptions options_;
  std::vector<double> min_lrs_;
  double best_ = 0;
  int64_t num_bad_epochs_ = 0;
  int64_t cooldown_counter_ = 0;
  int64_t last_epoch_ = 0;
  std::vector<double> last_lr_;
};

}  // namespace kiln::optim
