// GradScaler (grad_scaler.h): the scale and its growth tracker on the device, per
// optimizer stages and found-inf flags, and the on-device scale update.
#include "optim/grad_scaler.h"

#include <cmath>
#include <limits>

#include "core/autograd/grad_mode.h"
#include "core/error.h"
#include "core/ops/elementwise.h"
#include "core/ops/factory.h"
#include "core/ops/multi_tensor.h"

namespace kiln::optim {

GradScaler::GradScaler(GradScalerOptions options) : options_(options) { check_options(options_); }

void GradScaler::check_options(const GradScalerOptions& options) {
  KILN_CHECK(options.init_scale > 0 && std::isfinite(options.init_scale),
             "GradScaler: init_scale must be finite and > 0, got ", options.init_scale);
  KILN_CHECK(options.growth_factor > 1.0 && std::isfinite(options.growth_factor),
             "GradScaler: growth_factor must be finite and > 1, got ", options.growth_factor);
  KILN_CHECK(options.backoff_factor > 0.0 && options.backoff_factor < 1.0,
             "GradScaler: backoff_factor must lie in (0, 1), got ", options.backoff_factor);
  // The growth tracker counts clean steps in an Int32 on the device (as PyTorch's), so
  // a longer interval could never be reached: the count would overflow first.
  KILN_CHECK(options.growth_interval >= 1 && options.growth_interval <= std::numeric_limits<int32_t>::max(),
             "GradScaler: growth_interval must be in [1, 2^31 - 1], got ", options.growth_interval);
  KILN_CHECK(options.min_scale > 0 && std::isfinite(options.min_scale),
             "GradScaler: min_scale must be finite and > 0, got ", options.min_scale);
  KILN_CHECK(options.min_scale <= options.init_scale, "GradScaler: min_scale ", options.min_scale,
             " must not exceed init_scale ", options.init_scale);
}

void GradScaler::lazy_init(Device device) {
  if (scale_.defined()) return;
  scale_ = full({1}, options_.init_scale, {.dtype = DType::Float32, .device = device});
  growth_tracker_ = full({1}, init_growth_tracker_, {.dtype = DType::Int32, .device = device});
}

Tensor GradScaler::scale(const Tensor& loss) {
  if (!options_.enabled) return loss;
  KILN_CHECK(loss.defined(), "GradScaler.scale: undefined loss");
  KILN_CHECK(loss.is_floating_point(), "GradScaler.scale: the loss must be floating point, got ", loss.dtype());
  lazy_init(loss.device());
  // As PyTorch 2.x, whose scale is a float32 [] tensor: a float16 [] loss is scaled into
  // float32 (two zero-dim tensors promote), a float16 loss with dimensions stays float16
  // (reduce it first: loss * 2^16 overflows float16 past 1).
  return mul(loss, scale_.to(loss.device(), /*non_blocking=*/true).reshape({}));
}

std::vector<Tensor> GradScaler::persistent_tensors() const {
  if (!scale_.defined()) return {};
  return {scale_, growth_tracker_};
}

Tensor GradScaler::inverse_scale() const {
  NoGradGuard no_grad;
  return reciprocal(scale_.to(DType::Float64)).to(DType::Float32);
}

Tensor GradScaler::combined_found_inf(const std::vector<Tensor>& per_device) const {
  NoGradGuard no_grad;
  KILN_ASSERT(!per_device.empty(), "GradScaler: no found-inf flags to combine");
  Tensor total = per_device[0].to(scale_.device(), /*non_blocking=*/true);
  for (size_t i = 1; i < per_device.size(); ++i)
    total = add(total, per_device[i].to(scale_.device(), /*non_blocking=*/true));
  return total;
}

void GradScaler::unscale_(Optimizer& optimizer) {
  if (!options_.enabled) return;
  KILN_CHECK(scale_.defined(), "GradScaler.unscale_: scale() has not been called yet, so there is no scale");
  PerOptimizer& state = per_optimizer_[&optimizer];
  KILN_CHECK(state.stage != Stage::Unscaled,
             "GradScaler.unscale_: already called on this optimizer since the last update()");
  KILN_CHECK(state.stage != Stage::Stepped, "GradScaler.unscale_: called after step() (call it before step())");
  state.found_inf_per_device = optimizer.unscale_grads_(inverse_scale());
  state.stage = Stage::Unscaled;
}

void GradScaler::step(Optimizer& optimizer) {
  if (!options_.enabled) {
    optimizer.step();
    return;
  }
  KILN_CHECK(scale_.defined(), "GradScaler.step: scale() has not been called yet, so there is no scale");
  PerOptimizer& state = per_optimizer_[&optimizer];
  KILN_CHECK(state.stage != Stage::Stepped, "GradScaler.step: already called on this optimizer since the last update()");
  AmpStepArgs amp;
  if (state.stage == Stage::Ready) {
    // Check only and let the kernels unscale as they read (with master weights, the
    // check has written unscaled master gradients already).
    const Tensor inv_scale = inverse_scale();
    state.found_inf_per_device = optimizer.check_grads_finite_(inv_scale);
    if (!optimizer.has_master_weights()) amp.inv_scale = inv_scale;
  }
  if (!state.found_inf_per_device.empty()) amp.found_inf = combined_found_inf(state.found_inf_per_device);
  optimizer.step(amp);
  state.stage = Stage::Stepped;
}

void GradScaler::update() {
  if (!options_.enabled) return;
  KILN_CHECK(scale_.defined(), "GradScaler.update: scale() has not been called yet, so there is no scale");
  std::vector<Tensor> flags;
  bool any_checked = false;
  for (const auto& [optimizer, state] : per_optimizer_) {
    if (state.stage == Stage::Ready) continue;
    any_checked = true;
    flags.insert(flags.end(), state.found_inf_per_device.begin(), state.found_inf_per_device.end());
  }
  KILN_CHECK(any_checked, "GradScaler.update: no inf checks were recorded since the last update(); call step() first");
  // An optimizer whose parameters had no gradients records no flags: a clean step.
  const Tensor found_inf = flags.empty() ? zeros({1}, {.dtype = DType::Float32, .device = scale_.device()})
                                         : combined_found_inf(flags);
  amp_update_scale_(scale_, growth_tracker_, found_inf, options_.growth_factor, options_.backoff_factor,
                    options_.growth_interval, options_.min_scale);
  per_optimizer_.clear();
}

void GradScaler::update(double new_scale) {
  if (!options_.enabled) return;
  KILN_CHECK(scale_.defined(), "GradScaler.update: scale() has not been called yet, so there is no scale");
  KILN_CHECK(new_scale > 0 && std::isfinite(new_scale), "GradScaler.update: new_scale must be finite and > 0, got ",
             new_scale);
  KILN_CHECK(new_scale >= options_.min_scale, "GradScaler.update: new_scale ", new_scale,
             " is below min_scale ", options_.min_scale, ". Hint: lower it first with set_min_scale()");
  NoGradGuard no_grad;
  scale_.fill_(new_scale);
  per_optimizer_.clear();
}

double GradScaler::get_scale() const {
  if (!options_.enabled) return 1.0;
  return scale_.defined() ? scale_.item<double>() : options_.init_scale;
}

template <typename T>
void GradScaler::set_option(T GradScalerOptions::*option, T value) {
  GradScalerOptions next = options_;
  next.*option = value;
  check_options(next);  // a bad value changes nothing
  options_ = next;
}

void GradScaler::set_growth_factor(double factor) { set_option(&GradScalerOptions::growth_factor, factor); }
void GradScaler::set_backoff_factor(double factor) { set_option(&GradScalerOptions::backoff_factor, factor); }
void GradScaler::set_growth_interval(int64_t interval) {
  set_option(&GradScalerOptions::growth_interval, interval);
}
void GradScaler::set_min_scale(double min_scale) {
  GradScalerOptions next = options_;
  next.min_scale = min_scale;
  check_options(next);
  // The scale may have backed off below init_scale since: the floor must not be above it.
  if (options_.enabled && scale_.defined()) {
    const double scale = get_scale();
    KILN_CHECK(min_scale <= scale, "GradScaler.set_min_scale: min_scale ", min_scale,
               " must not exceed the current scale ", scale);
  }
  options_ = next;
}

json::Value GradScaler::state_dict() const {
  if (!options_.enabled) return json::Value::object();
  const int64_t tracker = growth_tracker_.defined() ? growth_tracker_.item<int64_t>() : init_growth_tracker_;
  return json::Value::object({{"scale", json::Value::number(get_scale())},
                              {"growth_factor", json::Value::number(options_.growth_factor)},
                              {"backoff_factor", json::Value::number(options_.backoff_factor)},
                              {"growth_interval", json::Value::integer(options_.growth_interval)},
                              {"_growth_tracker", json::Value::integer(tracker)},
                              {"min_scale", json::Value::number(options_.min_scale)}});
}

namespace {
const json::Value& member(const json::Value& state, const char* key) {
  const json::Value* value = state.find(key);
  KILN_CHECK(value != nullptr, "GradScaler.load_state_dict: the state has no \"", key, "\"");
  return *value;
}
}  // namespace

void GradScaler::load_state_dict(const json::Value& state) {
  if (!options_.enabled) return;  // as PyTorch: a disabled scaler ignores any state
  KILN_CHECK(state.is(json::Type::Object), "GradScaler.load_state_dict: expected an object, got ",
             json::with_article(state.type()));
  KILN_CHECK(!state.as_object().empty(), "GradScaler.load_state_dict: the state is empty, possibly because it was "
                                         "saved from a disabled GradScaler");
  GradScalerOptions next = options_;
  next.init_scale = member(state, "scale").as_number();
  next.growth_factor = member(state, "growth_factor").as_number();
  next.backoff_factor = member(state, "backoff_factor").as_number();
  next.growth_interval = member(state, "growth_interval").as_integer();
  const int64_t tracker = member(state, "_growth_tracker").as_integer();
  KILN_CHECK(tracker >= 0 && tracker < next.growth_interval, "GradScaler.load_state_dict: _growth_tracker ",
             tracker, " is outside [0, growth_interval = ", next.growth_interval, ")");
  // Kiln's own key: a PyTorch state has none and keeps this scaler's floor.
  if (const json::Value* min_scale = state.find("min_scale")) next.min_scale = min_scale->as_number();
  // (A NaN fails neither comparison here and is named by check_options below.)
  KILN_CHECK(!(next.init_scale < next.min_scale), "GradScaler.load_state_dict: scale ", next.init_scale,
             " is below min_scale ", next.min_scale,
             " (Note [GradScaler min_scale]). Hint: lower it first with set_min_scale()");
  check_options(next);  // every option is valid before anything changes
  // Commit (Note [All-or-nothing loads]): plain assignments, and fills of the existing
  // scale and tracker tensors, which allocate nothing and whose values fit their dtypes
  // (the tracker is below growth_interval, at most 2^31 - 1).
  options_ = next;
  init_growth_tracker_ = tracker;
  if (scale_.defined()) {
    NoGradGuard no_grad;
    scale_.fill_(next.init_scale);
    growth_tracker_.fill_(tracker);
  }
}

}  // namespace kiln::optim
