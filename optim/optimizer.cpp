// Optimizer base: parameter groups and their options, zero_grad, per-parameter state,
// and the step driver that groups parameters by device and dtype for the fused kernels.
#include "optim/optimizer.h"

#include <unordered_set>

#include "core/autograd/grad_mode.h"
#include "core/error.h"

namespace kiln::optim {

double ParamGroup::get(const std::string& name) const {
  const auto it = options.find(name);
  KILN_CHECK(it != options.end(), "optimizer: parameter group has no option \"", name, "\"");
  return it->second;
}

Optimizer::Optimizer(std::string name, Options defaults) : name_(std::move(name)), defaults_(std::move(defaults)) {}

void Optimizer::add_param_group(ParamGroup group) {
  const std::string& who = name_;
  KILN_CHECK(!group.params.empty(), who, ": a parameter group has no parameters");
  std::unordered_set<const TensorImpl*> seen;
  for (const ParamGroup& existing : groups_)
    for (const Tensor& p : existing.params) seen.insert(p.impl());
  for (size_t i = 0; i < group.params.size(); ++i) {
    const Tensor& p = group.params[i];
    KILN_CHECK(p.defined(), who, ": parameter ", i, " of the group is undefined");
    KILN_CHECK(p.is_floating_point(), who, ": parameter ", i, " has dtype ", p.dtype(),
               "; only floating-point tensors can be optimized");
    KILN_CHECK(p.is_leaf(), who, ": parameter ", i, " (", p.sizes(),
               ") is not a leaf tensor; optimize the leaves (e.g. x.detach().requires_grad_())");
    KILN_CHECK(seen.insert(p.impl()).second, who, ": parameter ", i, " (", p.sizes(),
               ") appears in more than one parameter group (or twice in one)");
  }
  for (const auto& [key, value] : group.options)
    KILN_CHECK(defaults_.count(key) != 0 || key == "initial_lr" || key.rfind("base_", 0) == 0 ||
                   key.rfind("max_", 0) == 0,
               who, ": unknown option \"", key, "\" in a parameter group");
  for (const auto& [key, value] : defaults_) group.options.emplace(key, value);
  check_options(group.options);
  groups_.push_back(std::move(group));
}

void Optimizer::zero_grad(bool set_to_none) {
  NoGradGuard no_grad;
  for (ParamGroup& group : groups_) {
    for (const Tensor& p : group.params) {
      Tensor grad = p.grad();
      if (!grad.defined()) continue;
      if (set_to_none) {
        p.set_grad(Tensor());
      } else {
        grad.zero_();
      }
    }
  }
}

const ParamState& Optimizer::state(const Tensor& param) const {
  static const ParamState kEmpty;
  const auto it = state_.find(param.impl());
  return it == state_.end() ? kEmpty : it->second;
}

ParamState& Optimizer::mutable_state(const Tensor& param) { return state_[param.impl()]; }

}  // namespace kiln::optim
