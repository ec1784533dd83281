// Optimization (train/optimization.h).
#include "train/optimization.h"

#include "core/time_range.h"
#include "optim/clip_grad.h"
#include "train/bottleneck.h"
#include "train/optimizer_setup.h"

namespace kiln::train {

Optimization::Optimization(const RunContext& run, nn::Layer& model, int64_t steps_per_epoch, bool higher_is_better)
    : device_(run.device), clip_grad_norm_(run.config.clip_grad_norm), clip_grad_value_(run.config.clip_grad_value) {
  optimizer_ = make_optimizer(run.config, run.choices.optimizer, model.parameters());
  amp_initialize(model, *optimizer_, run.amp.level, run.amp.low_dtype);
  scaler_ = std::make_unique<optim::GradScaler>(
      optim::GradScalerOptions{.enabled = run.amp.dynamic_loss_scale && run.amp.low_dtype == DType::Float16});
  schedule_ = std::make_unique<Schedule>(run.config, run.choices, *optimizer_, steps_per_epoch, higher_is_better);
}

Tensor Optimization::scale(const Tensor& loss) { return scaler_->scale(loss); }

void Optimization::step() {
  const TimeRange range(phase::kOptimizer, device_);
  update();
  after_update();
}

void Optimization::update() {
  if (clip_grad_norm_ > 0 || clip_grad_value_ > 0) {
    scaler_->unscale_(*optimizer_);  // clip the true gradients, not the scaled ones
    const std::vector<Tensor> params = optimizer_->master_params();
    if (clip_grad_norm_ > 0)
      optim::clip_grad_norm_(params, clip_grad_norm_);
    else
      optim::clip_grad_value_(params, clip_grad_value_);
  }
  scaler_->step(*optimizer_);
  scaler_->update();
  optimizer_->zero_grad();  // to None
}

void Optimization::after_update() { schedule_->after_step(); }

std::vector<double> Optimization::scaler_signature() const {
  const optim::GradScalerOptions& o = scaler_->options();
  return {o.enabled ? 1.0 : 0.0, o.growth_factor, o.backoff_factor, static_cast<double>(o.growth_interval),
          o.min_scale};
}

double Optimization::loss_scale() const { return scaler_->is_enabled() ? scaler_->get_scale() : 1.0; }

void Optimization::load(const optim::OptimizerStateDict& optimizer, const json::Value& scheduler,
                        const json::Value& scaler) {
  optimizer_->load_state_dict(optimizer);
  schedule_->load_state_dict(scheduler);
  scaler_->load_state_dict(scaler);
}

}  // namespace kiln::train
