// MultiStepLR: when last_epoch is a milestone (k times), the group's current lr is
// multiplied by gamma^k; otherwise it is left as it is.
#include "optim/multi_step_lr.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "core/error.h"
#include "optim/scheduler_state.h"

namespace kiln::optim {

namespace {

void check_options(const MultiStepLROptions& options) {
  for (int64_t milestone : options.milestones)
    KILN_CHECK(milestone >= 0, "MultiStepLR: milestones must be >= 0, got ", milestone);
  KILN_CHECK(std::isfinite(options.gamma) && options.gamma > 0, "MultiStepLR: gamma must be positive, got ",
             options.gamma);
}

}  // namespace

MultiStepLR::MultiStepLR(Optimizer& optimizer, const MultiStepLROptions& options)
    : LRScheduler("MultiStepLR", optimizer), options_(options) {
  check_options(options_);
  initial_step();
}

std::vector<double> MultiStepLR::compute_lrs() {
  std::vector<double> lrs = group_lrs();
  const auto hits = std::count(options_.milestones.begin(), options_.milestones.end(), last_epoch());
  if (hits == 0) return lrs;
  // PyTorch: group["lr"] * gamma ** count (one power, not `hits` multiplications).
  const double factor = std::pow(options_.gamma, static_cast<double>(hits));
  for (double& lr : lrs) lr *= factor;
  return lrs;
}

void MultiStepLR::save_extra(json::Value& state) const {
  state.add("milestones", scheduler_state::integers(options_.milestones));
  state.add("gamma", scheduler_state::number(options_.gamma));
}

void MultiStepLR::load_extra(const json::Value& state) {
  MultiStepLROptions options{.milestones = scheduler_state::get_integers(state, name(), "milestones"),
                             .gamma = scheduler_state::get_number(state, name(), "gamma")};
  check_options(options);
  options_ = std::move(options);  // a move: the commit allocates nothing (Note [All-or-nothing loads])
}

}  // namespace kiln::optim
