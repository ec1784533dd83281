// StepLR: at every multiple of step_size (not at epoch 0) the group's current lr is
// multiplied by gamma; in between it is left as it is.
#include "optim/step_lr.h"

#include <cmath>

#include "core/error.h"
#include "optim/scheduler_state.h"

namespace kiln::optim {

namespace {

void check_options(const StepLROptions& options) {
  KILN_CHECK(options.step_size > 0, "StepLR: step_size must be positive, got ", options.step_size);
  KILN_CHECK(std::isfinite(options.gamma) && options.gamma > 0, "StepLR: gamma must be positive, got ",
             options.gamma);
}

}  // namespace

StepLR::StepLR(Optimizer& optimizer, const StepLROptions& options)
    : LRScheduler("StepLR", optimizer), options_(options) {
  check_options(options_);
  initial_step();
}

std::vector<double> StepLR::compute_lrs() {
  std::vector<double> lrs = group_lrs();
  if (last_epoch() == 0 || last_epoch() % options_.step_size != 0) return lrs;
  for (double& lr : lrs) lr *= options_.gamma;
  return lrs;
}

void StepLR::save_extra(json::Value& state) const {
  state.add("step_size", json::Value::integer(options_.step_size));
  state.add("gamma", scheduler_state::number(options_.gamma));
}

void StepLR::load_extra(const json::Value& state) {
  const StepLROptions options{.step_size = scheduler_state::get_integer(state, name(), "step_size"),
                              .gamma = scheduler_state::get_number(state, name(), "gamma")};
  check_options(options);
  options_ = options;
}

}  // namespace kiln::optim
