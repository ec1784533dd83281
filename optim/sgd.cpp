// SGD (optim/sgd.h): option checks as PyTorch's, and the update as one fused sgd_step_
// per bucket (two when some momentum buffers are new and some are not).
#include "optim/sgd.h"

#include "core/error.h"
#include "optim/option_checks.h"
#include "optim/option_fields.h"

namespace kiln::optim {
namespace {

constexpr OptionField<SGDOptions> kSgdFields[] = {
    number_option("lr", &SGDOptions::lr),
    number_option("momentum", &SGDOptions::momentum),
    number_option("dampening", &SGDOptions::dampening),
    number_option("weight_decay", &SGDOptions::weight_decay),
    flag_option("nesterov", &SGDOptions::nesterov),
    flag_option("maximize", &SGDOptions::maximize),
};

}  // namespace

SGD::SGD(std::vector<Tensor> params, SGDOptions options) : Optimizer("SGD", to_options<SGDOptions>(options, kSgdFields)) {
  add_param_group(ParamGroup{.params = std::move(params), .options = {}});
}

SGD::SGD(std::vector<ParamGroup> groups, SGDOptions defaults)
    : Optimizer("SGD", to_options<SGDOptions>(defaults, kSgdFields)) {
  add_param_groups(std::move(groups));
}

void SGD::check_options(const Options& options) const {
  const SGDOptions o = from_options<SGDOptions>("SGD", options, kSgdFields);
  check_at_least("SGD", "lr", o.lr, 0);
  check_at_least("SGD", "momentum", o.momentum, 0);
  check_at_least("SGD", "weight_decay", o.weight_decay, 0);
  KILN_CHECK(!o.nesterov || (o.momentum > 0 && o.dampening == 0),
             "SGD: nesterov momentum requires momentum > 0 and dampening = 0 (got momentum ", o.momentum,
             ", dampening ", o.dampening, ")");
}

// Note [SGD first step]: PyTorch starts a momentum buffer as a copy of the first
// gradient; the kernel does that for buffers created this step (first_step), and the
// ordinary momentum * buf + (1 - dampening) * g for the others. A buffer is created as
// zeros, so if GradScaler skips its first step (amp.found_inf) the next step treats it
// as an existing buffer: with dampening = 0 that is the same as a copy, otherwise the
// first gradient enters scaled by 1 - dampening.
void SGD::update(ParamGroup& group, const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                 const AmpStepArgs& amp) {
  const SGDOptions o = from_options<SGDOptions>("SGD", group.options, kSgdFields);
  SgdStepParams options{.lr = o.lr,
                        .momentum = o.momentum,
                        .dampening = o.dampening,
                        .weight_decay = o.weight_decay,
                        .nesterov = o.nesterov,
                        .maximize = o.maximize,
                        .first_step = false,
                        .scheduled = scheduled_options(group, params[0].device())};
  if (options.momentum == 0) {
    sgd_step_(params, grads, {}, options, amp);
    return;
  }
  std::vector<bool> is_new;
  const std::vector<Tensor> buffers = state_list(params, "momentum_buffer", &is_new);
  for (const bool first_step : {false, true}) {
    std::vector<Tensor> some_params, some_grads, some_buffers;
    for (size_t i = 0; i < params.size(); ++i) {
      if (is_new[i] != first_step) continue;
      some_params.push_back(params[i]);
      some_grads.push_back(grads[i]);
      some_buffers.push_back(buffers[i]);
    }
    if (some_params.empty()) continue;
    options.first_step = first_step;
    sgd_step_(some_params, some_grads, some_buffers, options, amp);
  }
}

}  // namespace kiln::optim
