// Adam and AdamW (optim/adam.h): option checks as PyTorch's, and the update as one fused
// adam_step_ per bucket, after step() has incremented the step counters.
#include "optim/adam.h"

#include "core/error.h"
#include "optim/option_checks.h"

namespace kiln::optim {
namespace {

template <typename AnyAdamOptions>
Options to_options(const AnyAdamOptions& o) {
  return {{"lr", o.lr},
          {"beta1", o.beta1},
          {"beta2", o.beta2},
          {"eps", o.eps},
          {"weight_decay", o.weight_decay},
          {"amsgrad", o.amsgrad ? 1.0 : 0.0},
          {"maximize", o.maximize ? 1.0 : 0.0}};
}

}  // namespace

Adam::Adam(std::string name, bool decoupled_weight_decay, Options defaults)
    : Optimizer(std::move(name), std::move(defaults)), decoupled_weight_decay_(decoupled_weight_decay) {}

Adam::Adam(std::vector<Tensor> params, AdamOptions options) : Adam("Adam", false, to_options(options)) {
  add_param_group(ParamGroup{.params = std::move(params), .options = {}});
}

Adam::Adam(std::vector<ParamGroup> groups, AdamOptions defaults) : Adam("Adam", false, to_options(defaults)) {
  KILN_CHECK(!groups.empty(), "Adam: got an empty list of parameter groups");
  for (ParamGroup& group : groups) add_param_group(std::move(group));
}

AdamW::AdamW(std::vector<Tensor> params, AdamWOptions options) : Adam("AdamW", true, to_options(options)) {
  add_param_group(ParamGroup{.params = std::move(params), .options = {}});
}

AdamW::AdamW(std::vector<ParamGroup> groups, AdamWOptions defaults) : Adam("AdamW", true, to_options(defaults)) {
  KILN_CHECK(!groups.empty(), "AdamW: got an empty list of parameter groups");
  for (ParamGroup& group : groups) add_param_group(std::move(group));
}

void Adam::check_options(const Options& options) const {
  check_at_least(name(), options, "lr", 0);
  check_at_least(name(), options, "eps", 0);
  check_in_range(name(), options, "beta1", 0, 1);
  check_in_range(name(), options, "beta2", 0, 1);
  check_at_least(name(), options, "weight_decay", 0);
  check_flag(name(), options, "amsgrad");
  check_flag(name(), options, "maximize");
}

void Adam::update(ParamGroup& group, const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                  const AmpStepArgs& amp) {
  const AdamStepParams options{.lr = group.get("lr"),
                               .beta1 = group.get("beta1"),
                               .beta2 = group.get("beta2"),
                               .eps = group.get("eps"),
                               .weight_decay = group.get("weight_decay"),
                               .decoupled_weight_decay = decoupled_weight_decay_,
                               .amsgrad = group.get("amsgrad") != 0,
                               .maximize = group.get("maximize") != 0};
  const std::vector<Tensor> exp_avgs = state_list(params, "exp_avg");
  const std::vector<Tensor> exp_avg_sqs = state_list(params, "exp_avg_sq");
  const std::vector<Tensor> max_exp_avg_sqs = options.amsgrad ? state_list(params, "max_exp_avg_sq") : std::vector<Tensor>{};
  adam_step_(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, step_counters(params), options, amp);
}

}  // namespace kiln::optim
