// ReduceLROnPlateau: the better-than test, the bad-epoch and cooldown counters, and the
// reduction of every group's lr towards its min_lr.
#include "optim/reduce_lr_on_plateau.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "optim/scheduler_state.h"

namespace kiln::optim {

namespace {

const char* const kWho = "ReduceLROnPlateau";

void check_options(const ReduceLROnPlateauOptions& o) {
  KILN_CHECK(o.factor >= 0 && o.factor < 1, kWho,
             ": factor must be in [0, 1) (the lr is multiplied by it), got ", o.factor);
  KILN_CHECK(o.patience >= 0, kWho, ": patience must be >= 0, got ", o.patience);
  KILN_CHECK(std::isfinite(o.threshold) && o.threshold >= 0, kWho, ": threshold must be >= 0, got ",
             o.threshold);
  KILN_CHECK(o.cooldown >= 0, kWho, ": cooldown must be >= 0, got ", o.cooldown);
  KILN_CHECK(std::isfinite(o.eps) && o.eps >= 0, kWho, ": eps must be >= 0, got ", o.eps);
}

void check_min_lrs(const std::vector<double>& min_lrs) {
  for (double v : min_lrs) KILN_CHECK(std::isfinite(v) && v >= 0, kWho, ": min_lr must be >= 0, got ", v);
}

double worst(PlateauMode mode) {
  const double inf = std::numeric_limits<double>::infinity();
  return mode == PlateauMode::Min ? inf : -inf;
}

}  // namespace

ReduceLROnPlateau::ReduceLROnPlateau(Optimizer& optimizer, const ReduceLROnPlateauOptions& options)
    : optimizer_(optimizer), options_(options) {
  check_options(options_);
  min_lrs_ = options_.min_lr.per_group(optimizer_.param_groups().size(), kWho, "min_lr");
  check_min_lrs(min_lrs_);
  best_ = worst(options_.mode);
  for (const ParamGroup& group : optimizer_.param_groups()) last_lr_.push_back(group.lr());
}

bool ReduceLROnPlateau::is_better(double metric) const {
  const double t = options_.threshold;
  if (options_.mode == PlateauMode::Min)
    return options_.threshold_mode == ThresholdMode::Rel ? metric < best_ * (1.0 - t) : metric < best_ - t;
  return options_.threshold_mode == ThresholdMode::Rel ? metric > best_ * (t + 1.0) : metric > best_ + t;
}

void ReduceLROnPlateau::step(double metric) {
  ++last_epoch_;
  if (is_better(metric)) {
    best_ = metric;
    num_bad_epochs_ = 0;
  } else {
    ++num_bad_epochs_;
  }
  if (in_cooldown()) {
    --cooldown_counter_;
    num_bad_epochs_ = 0;  // bad epochs in cooldown are ignored
  }
  if (num_bad_epochs_ > options_.patience) {
    reduce_lrs();
    cooldown_counter_ = options_.cooldown;
    num_bad_epochs_ = 0;
  }
  last_lr_.clear();
  for (const ParamGroup& group : optimizer_.param_groups()) last_lr_.push_back(group.lr());
}

void ReduceLROnPlateau::reduce_lrs() {
  std::vector<ParamGroup>& groups = optimizer_.param_groups();
  KILN_CHECK(groups.size() == min_lrs_.size(), kWho, ": the optimizer has ", groups.size(),
             " parameter group(s) but min_lr has ", min_lrs_.size(),
             "; build a new scheduler after add_param_group");
  for (size_t i = 0; i < groups.size(); ++i) {
    const double old_lr = groups[i].lr();
    const double new_lr = std::max(old_lr * options_.factor, min_lrs_[i]);
    if (old_lr - new_lr > options_.eps) groups[i].set_lr(new_lr);
  }
}

json::Value ReduceLROnPlateau::state_dict() const {
  namespace ss = scheduler_state;
  json::Value state = ss::make(kWho);
  state.add("last_epoch", json::Value::integer(last_epoch_));
  state.add("last_lr", ss::numbers(last_lr_));
  state.add("mode", json::Value::string(options_.mode == PlateauMode::Min ? "min" : "max"));
  state.add("factor", ss::number(options_.factor));
  state.add("patience", json::Value::integer(options_.patience));
  state.add("threshold", ss::number(options_.threshold));
  state.add("threshold_mode",
            json::Value::string(options_.threshold_mode == ThresholdMode::Rel ? "rel" : "abs"));
  state.add("cooldown", json::Value::integer(options_.cooldown));
  state.add("min_lrs", ss::numbers(min_lrs_));
  state.add("eps", ss::number(options_.eps));
  state.add("best", ss::number(best_));
  state.add("num_bad_epochs", json::Value::integer(num_bad_epochs_));
  state.add("cooldown_counter", json::Value::integer(cooldown_counter_));
  return state;
}

void ReduceLROnPlateau::load_state_dict(const json::Value& state) {
  namespace ss = scheduler_state;
  ss::check_scheduler(state, kWho);
  const size_t groups = optimizer_.param_groups().size();
  const std::string mode = ss::get_string(state, kWho, "mode");
  const std::string threshold_mode = ss::get_string(state, kWho, "threshold_mode");
  KILN_CHECK(mode == "min" || mode == "max", kWho,
             ": load_state_dict: mode must be \"min\" or \"max\", got \"", mode, "\"");
  KILN_CHECK(threshold_mode == "rel" || threshold_mode == "abs", kWho,
             ": load_state_dict: threshold_mode must be \"rel\" or \"abs\", got \"", threshold_mode, "\"");
  ReduceLROnPlateauOptions options{
      .mode = mode == "min" ? PlateauMode::Min : PlateauMode::Max,
      .factor = ss::get_number(state, kWho, "factor"),
      .patience = ss::get_integer(state, kWho, "patience"),
      .threshold = ss::get_number(state, kWho, "threshold"),
      .threshold_mode = threshold_mode == "rel" ? ThresholdMode::Rel : ThresholdMode::Abs,
      .cooldown = ss::get_integer(state, kWho, "cooldown"),
      .min_lr = ss::get_numbers(state, kWho, "min_lrs", groups),
      .eps = ss::get_number(state, kWho, "eps")};
  check_options(options);
  std::vector<double> min_lrs = options.min_lr.per_group(groups, kWho, "min_lr");
  check_min_lrs(min_lrs);
  const int64_t last_epoch = ss::get_integer(state, kWho, "last_epoch");
  std::vector<double> last_lr = ss::get_numbers(state, kWho, "last_lr", groups);
  const double best = ss::get_number(state, kWho, "best");
  const int64_t num_bad_epochs = ss::get_integer(state, kWho, "num_bad_epochs");
  const int64_t cooldown_counter = ss::get_integer(state, kWho, "cooldown_counter");
  KILN_CHECK(last_epoch >= 0 && num_bad_epochs >= 0 && cooldown_counter >= 0, kWho,
             ": load_state_dict: counters must be >= 0 (last_epoch ", last_epoch, ", num_bad_epochs ",
             num_bad_epochs, ", cooldown_counter ", cooldown_counter, ")");
  // Commit (Note [All-or-nothing loads]): moves, and writes of the lr the groups hold.
  options_ = std::move(options);
  min_lrs_ = std::move(min_lrs);
  last_epoch_ = last_epoch;
  last_lr_ = std::move(last_lr);
  best_ = best;
  num_bad_epochs_ = num_bad_epochs;
  cooldown_counter_ = cooldown_counter;
  std::vector<ParamGroup>& param_groups = optimizer_.param_groups();
  for (size_t i = 0; i < groups; ++i) param_groups[i].set_lr(last_lr_[i]);
}

}  // namespace kiln::optim
