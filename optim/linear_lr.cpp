// LinearLR: epoch 0 multiplies the group's lr by start_factor; each step up to
// total_iters multiplies it by the ratio of consecutive factors; afterwards it stays.
#include "optim/linear_lr.h"

#include "core/error.h"
#include "optim/scheduler_state.h"

namespace kiln::optim {

namespace {

void check_options(const LinearLROptions& options) {
  KILN_CHECK(options.start_factor > 0 && options.start_factor <= 1,
             "LinearLR: start_factor must be in (0, 1], got ", options.start_factor);
  KILN_CHECK(options.end_factor >= 0 && options.end_factor <= 1,
             "LinearLR: end_factor must be in [0, 1], got ", options.end_factor);
  KILN_CHECK(options.total_iters > 0, "LinearLR: total_iters must be positive, got ", options.total_iters);
}

}  // namespace

LinearLR::LinearLR(Optimizer& optimizer, const LinearLROptions& options)
    : LRScheduler("LinearLR", optimizer), options_(options) {
  check_options(options_);
  initial_step();
}

std::vector<double> LinearLR::compute_lrs() {
  const int64_t t = last_epoch();
  const double start = options_.start_factor;
  const double end = options_.end_factor;
  std::vector<double> lrs = group_lrs();
  if (t == 0) {
    for (double& lr : lrs) lr *= start;
    return lrs;
  }
  if (t > options_.total_iters) return lrs;
  const double ratio = 1.0 + (end - start) / (static_cast<double>(options_.total_iters) * start +
                                              static_cast<double>(t - 1) * (end - start));
  for (double& lr : lrs) lr *= ratio;
  return lrs;
}

void LinearLR::save_extra(json::Value& state) const {
  state.add("start_factor", scheduler_state::number(options_.start_factor));
  state.add("end_factor", scheduler_state::number(options_.end_factor));
  state.add("total_iters", json::Value::integer(options_.total_iters));
}

void LinearLR::load_extra(const json::Value& state) {
  namespace ss = scheduler_state;
  const LinearLROptions options{.start_factor = ss::get_number(state, name(), "start_factor"),
                                .end_factor = ss::get_number(state, name(), "end_factor"),
                                .total_iters = ss::get_integer(state, name(), "total_iters")};
  check_options(options);
  options_ = options;
}

}  // namespace kiln::optim
