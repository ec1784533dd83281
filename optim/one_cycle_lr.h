// OneCycleLR: the 1cycle policy (Smith & Topin, "Super-Convergence"), as
// torch.optim.lr_scheduler.OneCycleLR, stepped once per batch.
//
// Each group's lr starts at initial_lr = max_lr / div_factor, rises to max_lr over the
// first pct_start of total_steps, then falls to min_lr = initial_lr / final_div_factor.
// With three_phase it falls back to initial_lr symmetrically first and only then to
// min_lr. Momentum (with cycle_momentum) moves the other way between max_momentum and
// base_momentum. Phase boundaries are PyTorch's, in steps:
//     two phases:   pct_start T - 1,  T - 1
//     three phases: pct_start T - 1,  2 pct_start T - 2,  T - 1
// and within a phase pct = (t - phase start) / (phase end - phase start) goes 0 -> 1;
// anneal is cos:    end + (start - end) / 2 (1 + cos(pi pct))
//           linear: (end - start) pct + start.
// The lr is a closed form of last_epoch. Stepping past total_steps is an error, as in
// PyTorch (which allows last_epoch == total_steps, one step past the last phase).
//
// The constructor overwrites every group's "initial_lr" with max_lr / div_factor (as
// PyTorch does) and, with cycle_momentum, sets the momentum option (momentum_option() in
// optim/lr_scheduler.h: "beta1" for Adam, "momentum" for SGD) to max_momentum.
//
// Options in PyTorch's order, as designated initializers:
//   OneCycleLR scheduler(optimizer, OneCycleLROptions{.max_lr = 0.1, .epochs = 10, .steps_per_epoch = 500});
#pragma once

#include <cstdint>
#include <optional>

#include "optim/lr_scheduler.h"

namespace kiln::optim {

enum class AnnealStrategy { Cos, Linear };

struct OneCycleLROptions {
  GroupValues max_lr = {};                            // required: one value or one per group
  std::optional<int64_t> total_steps = std::nullopt;  // or epochs * steps_per_epoch
  std::optional<int64_t> epochs = std::nullopt;
  std::optional<int64_t> steps_per_epoch = std::nullopt;
  double pct_start = 0.3;  // in [0, 1]: fraction of steps spent rising
  AnnealStrategy anneal_strategy = AnnealStrategy::Cos;
  bool cycle_momentum = true;
  GroupValues base_momentum = 0.85;
  GroupValues max_momentum = 0.95;
  double div_factor = 25;         // initial_lr = max_lr / div_factor
  double final_div_factor = 1e4;  // min_lr = initial_lr / final_div_factor
  bool three_phase = false;
};

class OneCycleLR : public LRScheduler {
 public:
  OneCycleLR(Optimizer& optimizer, const OneCycleLROptions& options);
  int64_t total_steps() const { return total_steps_; }

 protected:
  std::vector<double> compute_lrs() override;
  void save_extra(json::Value& state) const override;
  void load_extra(const json::Value& state) override;
  void restore_group_extras() override;

 private:
  // One phase of the schedule: it ends at end_step and moves lr and momentum between
  // the named per-group values.
  enum class Level { Initial, Max, Min, BaseMomentum, MaxMomentum };
  struct Phase {
    double end_step;
    Level start_lr, end_lr, start_momentum, end_momentum;
  };
  // The phase that holds a step, and the step it starts at.
  struct PhaseAt {
    size_t index;
    double start_step;
  };
  static std::vector<Phase> phases(int64_t total_steps, double pct_start, bool three_phase);
  // For a step <= total_steps (the caller checks it); a kiln::Error when its phase has no steps.
  static PhaseAt phase_at(const std::vector<Phase>& schedule, int64_t step, int64_t total_steps,
                          double pct_start);
  double level(Level which, size_t group) const;
  double anneal(double start, double end, double pct) const;

  int64_t total_steps_ = 0;
  double pct_start_ = 0;
  AnnealStrategy anneal_strategy_ = AnnealStrategy::Cos;
  bool three_phase_ = false;
  bool cycle_momentum_ = false;
  std::string momentum_key_;               // "beta1" or "momentum", with cycle_momentum
  std::vector<double> max_lrs_, min_lrs_;  // initial_lrs are base_lrs_
  std::vector<double> base_momentums_, max_momentums_;
};

}  // namespace kiln::optim
