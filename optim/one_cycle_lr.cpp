// OneCycleLR: the phases of the 1cycle policy and their cos / linear anneal, a closed
// form of last_epoch evaluated in PyTorch's operation order.
#include "optim/one_cycle_lr.h"

#include <cmath>
#include <numbers>
#include <utility>

#include "core/error.h"
#include "optim/scheduler_state.h"

namespace kiln::optim {

namespace {

const char* const kWho = "OneCycleLR";

int64_t resolve_total_steps(const OneCycleLROptions& options) {
  if (options.total_steps) {
    KILN_CHECK(*options.total_steps > 0, kWho, ": total_steps must be positive, got ", *options.total_steps);
    return *options.total_steps;
  }
  KILN_CHECK(options.epochs && options.steps_per_epoch, kWho,
             ": give either total_steps or both epochs and steps_per_epoch");
  KILN_CHECK(*options.epochs > 0, kWho, ": epochs must be positive, got ", *options.epochs);
  KILN_CHECK(*options.steps_per_epoch > 0, kWho, ": steps_per_epoch must be positive, got ",
             *options.steps_per_epoch);
  return *options.epochs * *options.steps_per_epoch;
}

void check_pct_start(double pct_start) {
  KILN_CHECK(pct_start >= 0 && pct_start <= 1, kWho, ": pct_start must be in [0, 1], got ", pct_start);
}

void check_positive(const std::vector<double>& values, const char* name) {
  for (double v : values)
    KILN_CHECK(std::isfinite(v) && v > 0, kWho, ": ", name, " must be positive, got ", v);
}

const char* strategy_name(AnnealStrategy strategy) {
  return strategy == AnnealStrategy::Cos ? "cos" : "linear";
}

AnnealStrategy parse_strategy(const std::string& name) {
  KILN_CHECK(name == "cos" || name == "linear", kWho,
             ": load_state_dict: anneal_strategy must be \"cos\" or ", "\"linear\", got \"", name, "\"");
  return name == "cos" ? AnnealStrategy::Cos : AnnealStrategy::Linear;
}

}  // namespace

OneCycleLR::OneCycleLR(Optimizer& optimizer, const OneCycleLROptions& options)
    : LRScheduler(kWho, optimizer),
      total_steps_(resolve_total_steps(options)),
      pct_start_(options.pct_start),
      anneal_strategy_(options.anneal_strategy),
      three_phase_(options.three_phase),
      cycle_momentum_(options.cycle_momentum) {
  check_pct_start(pct_start_);
  check_positive({options.div_factor}, "div_factor");
  check_positive({options.final_div_factor}, "final_div_factor");
  std::vector<ParamGroup>& groups = optimizer_.param_groups();
  max_lrs_ = options.max_lr.per_group(groups.size(), kWho, "max_lr");
  check_positive(max_lrs_, "max_lr");
  base_momentums_ = options.base_momentum.per_group(groups.size(), kWho, "base_momentum");
  max_momentums_ = options.max_momentum.per_group(groups.size(), kWho, "max_momentum");
  if (cycle_momentum_) momentum_key_ = momentum_option(optimizer_, kWho);
  for (size_t i = 0; i < groups.size(); ++i) {
    base_lrs_[i] = max_lrs_[i] / options.div_factor;
    min_lrs_.push_back(base_lrs_[i] / options.final_div_factor);
    groups[i].set("initial_lr", base_lrs_[i]);
    if (cycle_momentum_) groups[i].set(momentum_key_, max_momentums_[i]);
  }
  initial_step();
}

std::vector<OneCycleLR::Phase> OneCycleLR::phases(int64_t total_steps, double pct_start, bool three_phase) {
  const double steps = static_cast<double>(total_steps);
  const double last = static_cast<double>(total_steps - 1);
  if (three_phase) {
    return {{pct_start * steps - 1, Level::Initial, Level::Max, Level::MaxMomentum, Level::BaseMomentum},
            {2 * pct_start * steps - 2, Level::Max, Level::Initial, Level::BaseMomentum, Level::MaxMomentum},
            {last, Level::Initial, Level::Min, Level::MaxMomentum, Level::MaxMomentum}};
  }
  return {{pct_start * steps - 1, Level::Initial, Level::Max, Level::MaxMomentum, Level::BaseMomentum},
          {last, Level::Max, Level::Min, Level::BaseMomentum, Level::MaxMomentum}};
}

// The first phase that ends at or after `step`, else the last.
OneCycleLR::PhaseAt OneCycleLR::phase_at(const std::vector<Phase>& schedule, int64_t step,
                                         int64_t total_steps, double pct_start) {
  PhaseAt at{.index = 0, .start_step = 0};
  while (at.index + 1 < schedule.size() && static_cast<double>(step) > schedule[at.index].end_step) {
    at.start_step = schedule[at.index].end_step;
    ++at.index;
  }
  KILN_CHECK(schedule[at.index].end_step != at.start_step, kWho, ": phase ", at.index + 1,
             " of the schedule has no steps (pct_start ", pct_start, ", total_steps ", total_steps,
             "); change pct_start or total_steps");
  return at;
}

double OneCycleLR::level(Level which, size_t group) const {
  switch (which) {
    case Level::Initial:
      return base_lrs_[group];
    case Level::Max:
      return max_lrs_[group];
    case Level::Min:
      return min_lrs_[group];
    case Level::BaseMomentum:
      return base_momentums_[group];
    case Level::MaxMomentum:
      return max_momentums_[group];
  }
  KILN_ASSERT(false, "unknown OneCycleLR level");
  return 0;
}

double OneCycleLR::anneal(double start, double end, double pct) const {
  if (anneal_strategy_ == AnnealStrategy::Linear) return (end - start) * pct + start;
  const double cos_out = std::cos(std::numbers::pi * pct) + 1;
  return end + (start - end) / 2.0 * cos_out;
}

std::vector<double> OneCycleLR::compute_lrs() {
  const int64_t step = last_epoch();
  KILN_CHECK(step <= total_steps_, kWho, ": tried to step ", step, " times; total_steps is ", total_steps_,
             " (step once per batch, and give total_steps or epochs * steps_per_epoch for the whole run)");
  const std::vector<Phase> schedule = phases(total_steps_, pct_start_, three_phase_);
  const PhaseAt at = phase_at(schedule, step, total_steps_, pct_start_);
  const Phase& p = schedule[at.index];
  const double pct = (static_cast<double>(step) - at.start_step) / (p.end_step - at.start_step);
  std::vector<ParamGroup>& groups = optimizer_.param_groups();
  std::vector<double> lrs;
  for (size_t i = 0; i < base_lrs_.size(); ++i) {
    lrs.push_back(anneal(level(p.start_lr, i), level(p.end_lr, i), pct));
    if (cycle_momentum_)
      groups[i].set(momentum_key_, anneal(level(p.start_momentum, i), level(p.end_momentum, i), pct));
  }
  return lrs;
}

void OneCycleLR::save_extra(json::Value& state) const {
  namespace ss = scheduler_state;
  state.add("total_steps", json::Value::integer(total_steps_));
  state.add("pct_start", ss::number(pct_start_));
  state.add("anneal_strategy", json::Value::string(strategy_name(anneal_strategy_)));
  state.add("three_phase", json::Value::boolean(three_phase_));
  state.add("cycle_momentum", json::Value::boolean(cycle_momentum_));
  state.add("max_lrs", ss::numbers(max_lrs_));
  state.add("min_lrs", ss::numbers(min_lrs_));
  state.add("base_momentums", ss::numbers(base_momentums_));
  state.add("max_momentums", ss::numbers(max_momentums_));
}

void OneCycleLR::load_extra(const json::Value& state) {
  namespace ss = scheduler_state;
  const size_t groups = optimizer_.param_groups().size();
  const int64_t total_steps = ss::get_integer(state, kWho, "total_steps");
  KILN_CHECK(total_steps > 0, kWho, ": load_state_dict: total_steps must be positive, got ", total_steps);
  const double pct_start = ss::get_number(state, kWho, "pct_start");
  check_pct_start(pct_start);
  const AnnealStrategy strategy = parse_strategy(ss::get_string(state, kWho, "anneal_strategy"));
  const bool three_phase = ss::get_bool(state, kWho, "three_phase");
  const bool cycle_momentum = ss::get_bool(state, kWho, "cycle_momentum");
  std::vector<double> max_lrs = ss::get_numbers(state, kWho, "max_lrs", groups);
  std::vector<double> min_lrs = ss::get_numbers(state, kWho, "min_lrs", groups);
  std::vector<double> base_momentums = ss::get_numbers(state, kWho, "base_momentums", groups);
  std::vector<double> max_momentums = ss::get_numbers(state, kWho, "max_momentums", groups);
  std::string momentum_key = cycle_momentum ? momentum_option(optimizer_, kWho) : "";
  // With cycle_momentum the load ends by writing the momentum of last_epoch into the
  // groups (restore_group_extras), after the commit: a last_epoch that compute_lrs would
  // refuse is refused now, while nothing has changed (Note [All-or-nothing loads]).
  if (cycle_momentum) {
    const int64_t last_epoch = ss::get_integer(state, kWho, "last_epoch");
    KILN_CHECK(last_epoch <= total_steps, kWho, ": load_state_dict: last_epoch ", last_epoch,
               " is past total_steps ", total_steps, "; the momentum of that step cannot be restored");
    phase_at(phases(total_steps, pct_start, three_phase), last_epoch, total_steps, pct_start);
  }
  total_steps_ = total_steps;
  pct_start_ = pct_start;
  anneal_strategy_ = strategy;
  three_phase_ = three_phase;
  cycle_momentum_ = cycle_momentum;
  momentum_key_ = std::move(momentum_key);
  max_lrs_ = std::move(max_lrs);
  min_lrs_ = std::move(min_lrs);
  base_momentums_ = std::move(base_momentums);
  max_momentums_ = std::move(max_momentums);
}

void OneCycleLR::restore_group_extras() {
  if (cycle_momentum_) compute_lrs();  // sets the momentum of last_epoch; the lrs are last_lr
}

}  // namespace kiln::optim
