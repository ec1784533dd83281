// CyclicLR: the triangle wave, its scale policies and the inverse momentum cycle, a
// closed form of last_epoch evaluated in PyTorch's operation order.
#include "optim/cyclic_lr.h"

#include <cmath>
#include <utility>

#include "core/error.h"
#include "optim/scheduler_state.h"

namespace kiln::optim {

namespace {

const char* const kWho = "CyclicLR";

const char* mode_name(CyclicMode mode) {
  switch (mode) {
    case CyclicMode::Triangular:
      return "triangular";
    case CyclicMode::Triangular2:
      return "triangular2";
    case CyclicMode::ExpRange:
      return "exp_range";
  }
  return "?";
}

CyclicMode parse_mode(const std::string& name) {
  if (name == "triangular") return CyclicMode::Triangular;
  if (name == "triangular2") return CyclicMode::Triangular2;
  KILN_CHECK(name == "exp_range", kWho, ": load_state_dict: unknown mode \"", name, "\"");
  return CyclicMode::ExpRange;
}

void check_sizes(double up, double down) {
  KILN_CHECK(up > 0, kWho, ": step_size_up must be positive, got ", up);
  KILN_CHECK(down >= 0, kWho, ": step_size_down must be >= 0, got ", down);
}

// PyTorch sets every group's lr to base_lr before the base class records "initial_lr"
// (where absent); this runs in the base-class argument, so our base does the same.
Optimizer& with_base_lrs(Optimizer& optimizer, const CyclicLROptions& options) {
  std::vector<ParamGroup>& groups = optimizer.param_groups();
  const std::vector<double> base_lrs = options.base_lr.per_group(groups.size(), kWho, "base_lr");
  for (size_t i = 0; i < groups.size(); ++i) {
    KILN_CHECK(std::isfinite(base_lrs[i]) && base_lrs[i] >= 0, kWho, ": base_lr must be >= 0, got ",
               base_lrs[i]);
    groups[i].set_lr(base_lrs[i]);
  }
  return optimizer;
}

}  // namespace

CyclicLR::CyclicLR(Optimizer& optimizer, const CyclicLROptions& options)
    : LRScheduler(kWho, with_base_lrs(optimizer, options)),
      mode_(options.mode),
      gamma_(options.gamma),
      custom_scale_fn_(options.scale_fn),
      scale_mode_(options.scale_mode),
      cycle_momentum_(options.cycle_momentum) {
  std::vector<ParamGroup>& groups = optimizer_.param_groups();
  const double up = static_cast<double>(options.step_size_up);
  const double down = static_cast<double>(options.step_size_down.value_or(options.step_size_up));
  check_sizes(up, down);
  total_size_ = up + down;
  step_ratio_ = up / total_size_;
  KILN_CHECK(std::isfinite(gamma_) && gamma_ > 0, kWho, ": gamma must be positive, got ", gamma_);
  max_lrs_ = options.max_lr.per_group(groups.size(), kWho, "max_lr");
  for (double max_lr : max_lrs_)
    KILN_CHECK(std::isfinite(max_lr) && max_lr >= 0, kWho, ": max_lr must be >= 0, got ", max_lr);
  if (cycle_momentum_) {
    momentum_key_ = momentum_option(optimizer_, kWho);
    base_momentums_ = options.base_momentum.per_group(groups.size(), kWho, "base_momentum");
    max_momentums_ = options.max_momentum.per_group(groups.size(), kWho, "max_momentum");
    for (size_t i = 0; i < groups.size(); ++i) groups[i].set(momentum_key_, max_momentums_[i]);
  }
  // The groups' lrs are base_lr now (with_base_lrs); base_lrs are base_lr whatever an
  // older "initial_lr" says, as in PyTorch.
  base_lrs_ = group_lrs();
  initial_step();
}

double CyclicLR::scale(double cycle, int64_t t) const {
  const bool by_cycle = custom_scale_fn_ ? scale_mode_ == ScaleMode::Cycle : mode_ != CyclicMode::ExpRange;
  const double x = by_cycle ? cycle : static_cast<double>(t);
  if (custom_scale_fn_) return custom_scale_fn_(x);
  switch (mode_) {
    case CyclicMode::Triangular:
      return 1.0;
    case CyclicMode::Triangular2:
      return 1 / std::pow(2.0, x - 1);
    case CyclicMode::ExpRange:
      return std::pow(gamma_, x);
  }
  return 1.0;
}

std::vector<double> CyclicLR::compute_lrs() {
  const int64_t t = last_epoch();
  const double cycle = std::floor(1 + static_cast<double>(t) / total_size_);
  const double x = 1.0 + static_cast<double>(t) / total_size_ - cycle;
  const double scale_factor = x <= step_ratio_ ? x / step_ratio_ : (x - 1) / (step_ratio_ - 1);
  const double s = scale(cycle, t);
  std::vector<double> lrs;
  for (size_t i = 0; i < base_lrs_.size(); ++i) {
    const double base_height = (max_lrs_[i] - base_lrs_[i]) * scale_factor;
    lrs.push_back(base_lrs_[i] + base_height * s);
  }
  if (cycle_momentum_) {
    std::vector<ParamGroup>& groups = optimizer_.param_groups();
    for (size_t i = 0; i < groups.size(); ++i) {
      const double base_height = (max_momentums_[i] - base_momentums_[i]) * scale_factor;
      groups[i].set(momentum_key_, max_momentums_[i] - base_height * s);
    }
  }
  return lrs;
}

void CyclicLR::save_extra(json::Value& state) const {
  namespace ss = scheduler_state;
  state.add("max_lrs", ss::numbers(max_lrs_));
  state.add("total_size", ss::number(total_size_));
  state.add("step_ratio", ss::number(step_ratio_));
  state.add("mode", json::Value::string(mode_name(mode_)));
  state.add("gamma", ss::number(gamma_));
  state.add("custom_scale_fn", json::Value::boolean(static_cast<bool>(custom_scale_fn_)));
  state.add("scale_mode", json::Value::string(scale_mode_ == ScaleMode::Cycle ? "cycle" : "iterations"));
  state.add("cycle_momentum", json::Value::boolean(cycle_momentum_));
  if (cycle_momentum_) {
    state.add("base_momentums", ss::numbers(base_momentums_));
    state.add("max_momentums", ss::numbers(max_momentums_));
  }
}

void CyclicLR::load_extra(const json::Value& state) {
  namespace ss = scheduler_state;
  const size_t groups = optimizer_.param_groups().size();
  std::vector<double> max_lrs = ss::get_numbers(state, kWho, "max_lrs", groups);
  const double total_size = ss::get_number(state, kWho, "total_size");
  const double step_ratio = ss::get_number(state, kWho, "step_ratio");
  KILN_CHECK(total_size > 0 && step_ratio > 0 && step_ratio <= 1, kWho,
             ": load_state_dict: bad cycle shape (total_size ", total_size, ", step_ratio ", step_ratio, ")");
  const CyclicMode mode = parse_mode(ss::get_string(state, kWho, "mode"));
  const double gamma = ss::get_number(state, kWho, "gamma");
  const bool custom = ss::get_bool(state, kWho, "custom_scale_fn");
  KILN_CHECK(
      !custom || custom_scale_fn_, kWho,
      ": load_state_dict: the state was saved with a custom scale_fn, which cannot be serialised; build "
      "this scheduler with the same scale_fn before loading");
  const std::string scale_mode = ss::get_string(state, kWho, "scale_mode");
  KILN_CHECK(scale_mode == "cycle" || scale_mode == "iterations", kWho,
             ": load_state_dict: scale_mode must be \"cycle\" or \"iterations\", got \"", scale_mode, "\"");
  const bool cycle_momentum = ss::get_bool(state, kWho, "cycle_momentum");
  std::vector<double> base_momentums, max_momentums;
  std::string momentum_key;
  if (cycle_momentum) {
    base_momentums = ss::get_numbers(state, kWho, "base_momentums", groups);
    max_momentums = ss::get_numbers(state, kWho, "max_momentums", groups);
    momentum_key = momentum_option(optimizer_, kWho);
  }
  max_lrs_ = std::move(max_lrs);
  total_size_ = total_size;
  step_ratio_ = step_ratio;
  mode_ = mode;
  gamma_ = gamma;
  if (!custom) custom_scale_fn_ = nullptr;  // the saved schedule used the built-in mode
  scale_mode_ = scale_mode == "cycle" ? ScaleMode::Cycle : ScaleMode::Iterations;
  cycle_momentum_ = cycle_momentum;
  momentum_key_ = std::move(momentum_key);
  base_momentums_ = std::move(base_momentums);
  max_momentums_ = std::move(max_momentums);
}

void CyclicLR::restore_group_extras() {
  if (cycle_momentum_) compute_lrs();  // sets the momentum of last_epoch; the lrs are last_lr
}

}  // namespace kiln::optim
