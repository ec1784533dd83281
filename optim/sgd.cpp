// SGD (optim/sgd.h): option checks as PyTorch's, and the update as one fused sgd_step_
// per bucket (two when some momentum buffers are new and some are not).
#include "optim/sgd.h"

#include "core/error.h"
#include "optim/option_checks.h"

namespace kiln::optim {
namespace {

Options to_options(const SGDOptions& o) {
  return {{"lr", o.lr},
          {"momentum", o.momentum},
          {"dampening", o.dampening},
          {"weight_decay", o.weight_decay},
          {"nesterov", o.nesterov ? 1.0 : 0.0},
          {"maximize", o.maximize ? 1.0 : 0.0}};
}

}  // namespace

SGD::SGD(std::vector<Tensor> params, SGDOptions options) : Optimizer("SGD", to_options(options)) {
  add_param_group(ParamGroup{.params = std::move(params), .options = {}});
}

SGD::SGD(std::vector<ParamGroup> groups, SGDOptions defaults) : Optimizer("SGD", to_options(defaults)) {
  KILN_CHECK(!groups.empty(), "SGD: got an empty list of parameter groups");
  for (ParamGroup& group : groups) add_param_group(std::move(group));
}

void SGD::check_options(const Options& options) const {
  check_at_least("SGD", options, "lr", 0);
  check_at_least("SGD", options, "momentum", 0);
  check_at_least("SGD", options, "weight_decay", 0);
  check_flag("SGD", options, "nesterov");
  check_flag("SGD", options, "maximize");
  KILN_CHECK(options.at("nesterov") == 0 || (options.at("momentum") > 0 && options.at("dampening") == 0),
             "SGD: nesterov momentum requires momentum > 0 and dampening = 0 (got momentum ",
             options.at("momentum"), ", dampening ", options.at("dampening"), ")");
}

// Note [SGD first step]: PyTorch starts a momentum buffer as a copy of the first
// gradient; the kernel does that for buffers created this step (first_step), and the
// ordinary momentum * buf + (1 - dampening) * g for the others. A buffer is created as
// zeros, so if GradScaler skips its first step (amp.found_inf) the next step treats it
// as an existing buffer: with dampening = 0 that is the same as a copy, otherwise the
// first gradient enters scaled by 1 - dampening.
void SGD::update(ParamGroup& group, const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                 const AmpStepArgs& amp) {
  SgdStepParams options{.lr = group.get("lr"),
                        .momentum = group.get("momentum"),
                        .dampening = group.get("dampening"),
                        .weight_decay = group.get("weight_decay"),
                        .nesterov = group.get("nesterov") != 0,
                        .maximize = group.get("maximize") != 0,
                        .first_step = false};
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
