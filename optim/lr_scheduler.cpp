// LRScheduler base: initial_lr bookkeeping, the step driver that writes compute_lrs()
// into the groups, and the shared part of the state dict.
#include "optim/lr_scheduler.h"

#include "core/error.h"
#include "optim/scheduler_state.h"

namespace kiln::optim {

std::vector<double> GroupValues::per_group(size_t groups, const std::string& who,
                                           const std::string& name) const {
  KILN_CHECK(!values_.empty(), who, ": ", name, " is required");
  if (values_.size() == 1) return std::vector<double>(groups, values_[0]);
  KILN_CHECK(values_.size() == groups, who, ": expected ", groups, " values for ", name,
             " (one per parameter group) or a single one, got ", values_.size());
  return values_;
}

LRScheduler::LRScheduler(std::string name, Optimizer& optimizer)
    : optimizer_(optimizer), name_(std::move(name)) {
  for (ParamGroup& group : optimizer_.param_groups()) {
    if (!group.has("initial_lr")) group.set("initial_lr", group.lr());
    base_lrs_.push_back(group.get("initial_lr"));
  }
}

void LRScheduler::initial_step() {
  KILN_ASSERT(last_epoch_ == -1, "initial_step called twice");
  step();
}

void LRScheduler::step() {
  std::vector<ParamGroup>& groups = optimizer_.param_groups();
  KILN_CHECK(base_lrs_.size() == groups.size(), name_, ": the optimizer has ", groups.size(),
             " parameter group(s) but the scheduler was built for ", base_lrs_.size(),
             "; build a new scheduler after add_param_group");
  ++last_epoch_;
  std::vector<double> lrs = compute_lrs();
  KILN_ASSERT(lrs.size() == groups.size(), name_, " computed ", lrs.size(), " lrs for ", groups.size(),
              " groups");
  for (size_t i = 0; i < groups.size(); ++i) groups[i].set_lr(lrs[i]);
  last_lr_ = std::move(lrs);
}

std::vector<double> LRScheduler::group_lrs() const {
  std::vector<double> lrs;
  for (const ParamGroup& group : optimizer_.param_groups()) lrs.push_back(group.lr());
  return lrs;
}

json::Value LRScheduler::state_dict() const {
  json::Value state = scheduler_state::make(name_);
  state.add("last_epoch", json::Value::integer(last_epoch_));
  state.add("base_lrs", scheduler_state::numbers(base_lrs_));
  state.add("last_lr", scheduler_state::numbers(last_lr_));
  save_extra(state);
  return state;
}

void LRScheduler::load_state_dict(const json::Value& state) {
  namespace ss = scheduler_state;
  ss::check_scheduler(state, name_);
  const size_t groups = optimizer_.param_groups().size();
  const int64_t last_epoch = ss::get_integer(state, name_, "last_epoch");
  KILN_CHECK(last_epoch >= 0, name_, ": load_state_dict: last_epoch must be >= 0, got ", last_epoch);
  std::vector<double> base_lrs = ss::get_numbers(state, name_, "base_lrs", groups);
  std::vector<double> last_lr = ss::get_numbers(state, name_, "last_lr", groups);
  load_extra(state);  // checks everything before it assigns; nothing of ours changed yet
  // Commit (Note [All-or-nothing loads]): moves, and writes of options the groups hold.
  last_epoch_ = last_epoch;
  base_lrs_ = std::move(base_lrs);
  last_lr_ = std::move(last_lr);
  std::vector<ParamGroup>& param_groups = optimizer_.param_groups();
  for (size_t i = 0; i < groups; ++i) param_groups[i].set_lr(last_lr_[i]);
  restore_group_extras();
}

std::string momentum_option(const Optimizer& optimizer, const std::string& who) {
  if (optimizer.defaults().count("beta1") != 0) return "beta1";
  if (optimizer.defaults().count("momentum") != 0) return "momentum";
  throw Error(
      detail::str_cat(who, ": optimizer ", optimizer.name(),
                      " has neither \"momentum\" nor \"beta1\" to cycle; pass cycle_momentum = false"));
}

}  // namespace kiln::optim
