// LRScheduler: the base of the epoch/iteration learning-rate schedulers, as
// torch.optim.lr_scheduler.LRScheduler (PyTorch 2.x).
//
// Note [Scheduler step convention]: a scheduler is built after its optimizer. The
// constructor records "initial_lr" in every parameter group that lacks one (the group's
// lr at that moment), takes base_lrs from those, and performs the initial step: last_epoch
// goes from -1 to 0 and every group's lr is set to the epoch-0 value. Each later step()
// advances last_epoch by one and sets every group's "lr" to the value compute_lrs()
// returns. The usual loop is
//     for each epoch: train (optimizer.step() many times); scheduler.step();
// and get_last_lr() is the lr the optimizer used since the last step().
//
// Note [Recursive schedules]: like PyTorch's step(), StepLR, MultiStepLR, ExponentialLR,
// CosineAnnealingLR and LinearLR compute the new lr from the group's current lr (a
// multiplication per step), not from a closed form; a user who changes group lrs by hand
// in between therefore sees the change carried on, exactly as in PyTorch. The
// sequences agree with the closed forms up to rounding. OneCycleLR and CyclicLR are
// closed forms of last_epoch, as in PyTorch.
//
// Note [Scheduler state dicts]: state_dict() is a JSON object holding everything that
// decides the rest of the sequence: {"scheduler": name, "last_epoch", "base_lrs",
// "last_lr", plus each scheduler's hyper-parameters and counters}. Non-finite numbers
// (ReduceLROnPlateau's best starts at +-inf) are written as the strings "inf", "-inf",
// "nan". load_state_dict() checks the name, the group count and every field's type, and
// loads nothing when a check fails (Note [All-or-nothing loads] in core/safetensors.h).
// Unlike PyTorch it also writes last_lr back into the groups' "lr" (and the momentum the
// scheduler drives, if any), so a recursive schedule continues exactly even when the
// optimizer's own state was not restored; when it was, the values are the same ones.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "core/json.h"
#include "optim/optimizer.h"

namespace kiln::optim {

// A hyper-parameter given once for all groups or once per group, as PyTorch's
// `max_lr=0.1` or `max_lr=[0.1, 0.01]`: `.max_lr = 0.1` or `.max_lr = {0.1, 0.01}`.
class GroupValues {
 public:
  GroupValues() = default;                       // not given
  GroupValues(double value) : values_{value} {}  // NOLINT: implicit by design
  GroupValues(std::initializer_list<double> values) : values_(values) {}
  GroupValues(std::vector<double> values) : values_(std::move(values)) {}  // NOLINT

  bool empty() const { return values_.empty(); }
  // One value per group: a single value repeated, or the list when its length is
  // `groups`; otherwise a kiln::Error naming `who` and `name`.
  std::vector<double> per_group(size_t groups, const std::string& who, const std::string& name) const;

 private:
  std::vector<double> values_;
};

class LRScheduler {
 public:
  virtual ~LRScheduler() = default;
  LRScheduler(const LRScheduler&) = delete;
  LRScheduler& operator=(const LRScheduler&) = delete;

  // Advances last_epoch and sets every group's lr (Note [Scheduler step convention]).
  void step();

  // The lrs set by the last step(), one per group.
  const std::vector<double>& get_last_lr() const { return last_lr_; }
  // The groups' "initial_lr" when the scheduler was built.
  const std::vector<double>& base_lrs() const { return base_lrs_; }
  // 0 after construction, +1 per step().
  int64_t last_epoch() const { return last_epoch_; }

  // Note [Scheduler state dicts].
  json::Value state_dict() const;
  void load_state_dict(const json::Value& state);

  // "StepLR", "CosineAnnealingLR", ...
  const std::string& name() const { return name_; }
  Optimizer& optimizer() { return optimizer_; }

 protected:
  // Records "initial_lr" where absent and takes base_lrs from it; a derived constructor
  // finishes its own setup and then calls initial_step() (virtual calls cannot run from
  // this constructor).
  LRScheduler(std::string name, Optimizer& optimizer);
  void initial_step();

  // The lrs for last_epoch_ (PyTorch's get_lr), one per group; may also set momentum.
  virtual std::vector<double> compute_lrs() = 0;
  // A derived scheduler's own fields in and out of the state dict. load_extra reads and
  // checks every field, and whatever restore_group_extras will need, before it moves any
  // into place (so a failed load changes nothing); the base commits its own fields after
  // it (Note [All-or-nothing loads] in core/safetensors.h).
  virtual void save_extra(json::Value& /*state*/) const {}
  virtual void load_extra(const json::Value& /*state*/) {}
  // After a load's commit: re-applies what the scheduler drives besides lr (CyclicLR's and
  // OneCycleLR's momentum). It must not fail: load_extra has checked what it reads.
  virtual void restore_group_extras() {}

  // The current lrs of the groups (the base of the recursive schedules).
  std::vector<double> group_lrs() const;

  Optimizer& optimizer_;
  std::vector<double> base_lrs_;

 private:
  std::string name_;
  int64_t last_epoch_ = -1;
  std::vector<double> last_lr_;
};

// Which group option a cycling scheduler drives as momentum (OneCycleLR, CyclicLR), as
// PyTorch decides it: "beta1" when the optimizer's defaults have it (Adam, AdamW), else
// "momentum" (SGD, RMSprop); an optimizer with neither is an error naming `who`.
std::string momentum_option(const Optimizer& optimizer, const std::string& who);

}  // namespace kiln::optim
