// CosineAnnealingLR: PyTorch's recursive cosine step (Note [Recursive cosine]).
#include "optim/cosine_annealing_lr.h"

#include <cmath>
#include <numbers>

#include "core/error.h"
#include "optim/scheduler_state.h"

namespace kiln::optim {

namespace {

void check_options(const CosineAnnealingLROptions& options) {
  KILN_CHECK(options.T_max > 0, "CosineAnnealingLR: T_max must be positive, got ", options.T_max);
  KILN_CHECK(std::isfinite(options.eta_min) && options.eta_min >= 0,
             "CosineAnnealingLR: eta_min must be >= 0, got ", options.eta_min);
}

}  // namespace

CosineAnnealingLR::CosineAnnealingLR(Optimizer& optimizer, const CosineAnnealingLROptions& options)
    : LRScheduler("CosineAnnealingLR", optimizer), options_(options) {
  check_options(options_);
  initial_step();
}

std::vector<double> CosineAnnealingLR::compute_lrs() {
  constexpr double kPi = std::numbers::pi;
  const int64_t t = last_epoch();
  const double t_max = static_cast<double>(options_.T_max);
  const double eta_min = options_.eta_min;
  std::vector<double> lrs = group_lrs();
  if (t == 0) return lrs;
  if ((t - 1 - options_.T_max) % (2 * options_.T_max) == 0) {
    // The cosine's trough was the previous step: the ratio below would divide by 0.
    for (size_t i = 0; i < lrs.size(); ++i)
      lrs[i] += (base_lrs_[i] - eta_min) * (1 - std::cos(kPi / t_max)) / 2;
    return lrs;
  }
  const double ratio = (1 + std::cos(kPi * static_cast<double>(t) / t_max)) /
                       (1 + std::cos(kPi * static_cast<double>(t - 1) / t_max));
  for (double& lr : lrs) lr = ratio * (lr - eta_min) + eta_min;
  return lrs;
}

void CosineAnnealingLR::save_extra(json::Value& state) const {
  state.add("T_max", json::Value::integer(options_.T_max));
  state.add("eta_min", scheduler_state::number(options_.eta_min));
}

void CosineAnnealingLR::load_extra(const json::Value& state) {
  const CosineAnnealingLROptions options{.T_max = scheduler_state::get_integer(state, name(), "T_max"),
                                         .eta_min = scheduler_state::get_number(state, name(), "eta_min")};
  check_options(options);
  options_ = options;
}

}  // namespace kiln::optim
