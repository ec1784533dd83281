// RMSprop (optim/rmsprop.h): option checks as PyTorch's, and the update as one fused
// rmsprop_step_ per bucket.
#include "optim/rmsprop.h"

#include "core/error.h"
#include "optim/option_checks.h"
#include "optim/option_fields.h"

namespace kiln::optim {
namespace {

constexpr OptionField<RMSpropOptions> kRmspropFields[] = {
    number_option("lr", &RMSpropOptions::lr),
    number_option("alpha", &RMSpropOptions::alpha),
    number_option("eps", &RMSpropOptions::eps),
    number_option("weight_decay", &RMSpropOptions::weight_decay),
    number_option("momentum", &RMSpropOptions::momentum),
    flag_option("centered", &RMSpropOptions::centered),
    flag_option("maximize", &RMSpropOptions::maximize),
};

}  // namespace

RMSprop::RMSprop(std::vector<Tensor> params, RMSpropOptions options)
    : Optimizer("RMSprop", to_options<RMSpropOptions>(options, kRmspropFields)) {
  add_param_group(ParamGroup{.params = std::move(params), .options = {}});
}

RMSprop::RMSprop(std::vector<ParamGroup> groups, RMSpropOptions defaults)
    : Optimizer("RMSprop", to_options<RMSpropOptions>(defaults, kRmspropFields)) {
  add_param_groups(std::move(groups));
}

void RMSprop::check_options(const Options& options) const {
  const RMSpropOptions o = from_options<RMSpropOptions>("RMSprop", options, kRmspropFields);
  check_at_least("RMSprop", "lr", o.lr, 0);
  check_at_least("RMSprop", "eps", o.eps, 0);
  check_at_least("RMSprop", "momentum", o.momentum, 0);
  check_at_least("RMSprop", "weight_decay", o.weight_decay, 0);
  check_at_least("RMSprop", "alpha", o.alpha, 0);
}

void RMSprop::update(ParamGroup& group, const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                     const AmpStepArgs& amp) {
  const RMSpropOptions o = from_options<RMSpropOptions>("RMSprop", group.options, kRmspropFields);
  const RmspropStepParams options{.lr = o.lr,
                                  .alpha = o.alpha,
                                  .eps = o.eps,
                                  .weight_decay = o.weight_decay,
                                  .momentum = o.momentum,
                                  .centered = o.centered,
                                  .maximize = o.maximize,
                                  .scheduled = scheduled_options(group, params[0].device())};
  const std::vector<Tensor> square_avgs = state_list(params, "square_avg");
  const std::vector<Tensor> momentum_buffers =
      options.momentum > 0 ? state_list(params, "momentum_buffer") : std::vector<Tensor>{};
  const std::vector<Tensor> grad_avgs = options.centered ? state_list(params, "grad_avg") : std::vector<Tensor>{};
  rmsprop_step_(params, grads, square_avgs, momentum_buffers, grad_avgs, options, amp);
}

}  // namespace kiln::optim
