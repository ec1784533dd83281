// ExponentialLR: from epoch 1 on, the group's current lr is multiplied by gamma.
#include "optim/exponential_lr.h"

#include <cmath>

#include "core/error.h"
#include "optim/scheduler_state.h"

namespace kiln::optim {

namespace {

void check_options(const ExponentialLROptions& options) {
  KILN_CHECK(std::isfinite(options.gamma) && options.gamma > 0, "ExponentialLR: gamma must be positive, got ",
             options.gamma);
}

}  // namespace

ExponentialLR::ExponentialLR(Optimizer& optimizer, const ExponentialLROptions& options)
    : LRScheduler("ExponentialLR", optimizer), options_(options) {
  check_options(options_);
  initial_step();
}

std::vector<double> ExponentialLR::compute_lrs() {
  std::vector<double> lrs = group_lrs();
  if (last_epoch() == 0) return lrs;
  for (double& lr : lrs) lr *= options_.gamma;
  return lrs;
}

void ExponentialLR::save_extra(json::Value& state) const {
  state.add("gamma", scheduler_state::number(options_.gamma));
}

void ExponentialLR::load_extra(const json::Value& state) {
  const ExponentialLROptions options{.gamma = scheduler_state::get_number(state, name(), "gamma")};
  check_options(options);
  options_ = options;
}

}  // namespace kiln::optim
