// Adam and AdamW (optim/adam.h): option checks as PyTorch's, and the update as one fused
// adam_step_ per bucket, after step() has incremented the step counters.
#include "optim/adam.h"

#include "core/error.h"
#include "optim/option_checks.h"
#include "optim/option_fields.h"

namespace kiln::optim {
namespace {

// Adam's and AdamW's options have the same names (only their defaults differ).
template <typename AnyAdamOptions>
constexpr OptionField<AnyAdamOptions> kAdamFields[] = {
    number_option("lr", &AnyAdamOptions::lr),
    number_option("beta1", &AnyAdamOptions::beta1),
    number_option("beta2", &AnyAdamOptions::beta2),
    number_option("eps", &AnyAdamOptions::eps),
    number_option("weight_decay", &AnyAdamOptions::weight_decay),
    flag_option("amsgrad", &AnyAdamOptions::amsgrad),
    flag_option("maximize", &AnyAdamOptions::maximize),
};

template <typename AnyAdamOptions>
Options to_adam_options(const AnyAdamOptions& o) {
  return to_options<AnyAdamOptions>(o, kAdamFields<AnyAdamOptions>);
}

}  // namespace

Adam::Adam(std::string name, bool decoupled_weight_decay, Options defaults)
    : Optimizer(std::move(name), std::move(defaults)), decoupled_weight_decay_(decoupled_weight_decay) {}

Adam::Adam(std::vector<Tensor> params, AdamOptions options) : Adam("Adam", false, to_adam_options(options)) {
  add_param_group(ParamGroup{.params = std::move(params), .options = {}});
}

Adam::Adam(std::vector<ParamGroup> groups, AdamOptions defaults) : Adam("Adam", false, to_adam_options(defaults)) {
  add_param_groups(std::move(groups));
}

AdamW::AdamW(std::vector<Tensor> params, AdamWOptions options) : Adam("AdamW", true, to_adam_options(options)) {
  add_param_group(ParamGroup{.params = std::move(params), .options = {}});
}

AdamW::AdamW(std::vector<ParamGroup> groups, AdamWOptions defaults) : Adam("AdamW", true, to_adam_options(defaults)) {
  add_param_groups(std::move(groups));
}

void Adam::check_options(const Options& options) const {
  const AdamOptions o = from_options<AdamOptions>(name(), options, kAdamFields<AdamOptions>);
  check_at_least(name(), "lr", o.lr, 0);
  check_at_least(name(), "eps", o.eps, 0);
  check_in_range(name(), "beta1", o.beta1, 0, 1);
  check_in_range(name(), "beta2", o.beta2, 0, 1);
  check_at_least(name(), "weight_decay", o.weight_decay, 0);
}

void Adam::update(ParamGroup& group, const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                  const AmpStepArgs& amp) {
  const AdamOptions o = from_options<AdamOptions>(name(), group.options, kAdamFields<AdamOptions>);
  const AdamStepParams options{.lr = o.lr,
                               .beta1 = o.beta1,
                               .beta2 = o.beta2,
                               .eps = o.eps,
                               .weight_decay = o.weight_decay,
                               .decoupled_weight_decay = decoupled_weight_decay_,
                               .amsgrad = o.amsgrad,
                               .maximize = o.maximize,
                               .scheduled = scheduled_options(group, params[0].device())};
  const std::vector<Tensor> exp_avgs = state_list(params, "exp_avg");
  const std::vector<Tensor> exp_avg_sqs = state_list(params, "exp_avg_sq");
  const std::vector<Tensor> max_exp_avg_sqs = options.amsgrad ? state_list(params, "max_exp_avg_sq") : std::vector<Tensor>{};
  adam_step_(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, step_counters(params), options, amp);
}

}  // namespace kiln::optim
