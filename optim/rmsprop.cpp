// RMSprop (optim/rmsprop.h): option checks as PyTorch's, and the update as one fused
// rmsprop_step_ per bucket.
#include "optim/rmsprop.h"

#include "core/error.h"
#include "optim/option_checks.h"

namespace kiln::optim {
namespace {

Options to_options(const RMSpropOptions& o) {
  return {{"lr", o.lr},
          {"alpha", o.alpha},
          {"eps", o.eps},
          {"weight_decay", o.weight_decay},
          {"momentum", o.momentum},
          {"centered", o.centered ? 1.0 : 0.0},
          {"maximize", o.maximize ? 1.0 : 0.0}};
}

}  // namespace

RMSprop::RMSprop(std::vector<Tensor> params, RMSpropOptions options) : Optimizer("RMSprop", to_options(options)) {
  add_param_group(ParamGroup{.params = std::move(params), .options = {}});
}

RMSprop::RMSprop(std::vector<ParamGroup> groups, RMSpropOptions defaults)
    : Optimizer("RMSprop", to_options(defaults)) {
  KILN_CHECK(!groups.empty(), "RMSprop: got an empty list of parameter groups");
  for (ParamGroup& group : groups) add_param_group(std::move(group));
}

void RMSprop::check_options(const Options& options) const {
  check_at_least("RMSprop", options, "lr", 0);
  check_at_least("RMSprop", options, "eps", 0);
  check_at_least("RMSprop", options, "momentum", 0);
  check_at_least("RMSprop", options, "weight_decay", 0);
  check_at_least("RMSprop", options, "alpha", 0);
  check_flag("RMSprop", options, "centered");
  check_flag("RMSprop", options, "maximize");
}

void RMSprop::update(ParamGroup& group, const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                     const AmpStepArgs& amp) {
  const RmspropStepParams options{.lr = group.get("lr"),
                                  .alpha = group.get("alpha"),
                                  .eps = group.get("eps"),
                                  .weight_decay = group.get("weight_decay"),
                                  .momentum = group.get("momentum"),
                                  .centered = group.get("centered") != 0,
                                  .maximize = group.get("maximize") != 0};
  const std::vector<Tensor> square_avgs = state_list(params, "square_avg");
  const std::vector<Tensor> momentum_buffers =
      options.momentum > 0 ? state_list(params, "momentum_buffer") : std::vector<Tensor>{};
  const std::vector<Tensor> grad_avgs = options.centered ? state_list(params, "grad_avg") : std::vector<Tensor>{};
  rmsprop_step_(params, grads, square_avgs, momentum_buffers, grad_avgs, options, amp);
}

}  // namespace kiln::optim
