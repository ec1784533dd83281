// GradScaler: dynamic loss scaling for float16 training, as torch.amp.GradScaler.
//
// Float16 gradients of small magnitude underflow to zero. The scaler multiplies the loss
// by a large factor S before backward, so every gradient is computed S times larger, and
// divides them by S again before the optimizer uses them. S adapts: a step whose
// gradients hold an Inf or NaN (S was too large) is skipped and S is multiplied by
// backoff_factor; after growth_interval clean steps in a row, S is multiplied by
// growth_factor.
//
//   GradScaler scaler;                       // init_scale 2^16, growth 2, backoff 0.5, 2000
//   scaler.scale(loss).backward();
//   scaler.unscale_(optimizer);              // optional: before clip_grad_norm_
//   clip_grad_norm_(params, 1.0);
//   scaler.step(optimizer);                  // skipped if a gradient is not finite
//   scaler.update();
//
// Note [No host sync in GradScaler]: the scale, the growth tracker and the found-inf
// flags live on the device, and the decision to skip is taken there too: step() passes
// the flag to the optimizer's fused kernels (Backend::AmpStepArgs), which write nothing
// when it is set, and update() adjusts the scale with one tiny kernel. A training step
// with a scaler therefore costs no host-device synchronisation; get_scale() and
// state_dict() read the scale back and do sync.
//
// When step() finds the gradients not yet unscaled, it only checks them (one read) and
// lets the optimizer unscale as it reads them (PyTorch's path for fused optimizers)
// instead of rewriting every gradient; with master weights the float32 master gradients
// are written unscaled instead (Note [Master weights] in optim/optimizer.h).
//
// bfloat16 has float32's exponent range and needs no scaler; using one is harmless.
// With enabled = false every method is a pass-through (scale() returns the loss as is,
// step() calls optimizer.step()), so one training loop serves both.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "core/json.h"
#include "core/tensor.h"
#include "optim/optimizer.h"

namespace kiln::optim {

struct GradScalerOptions {
  double init_scale = 65536.0;  // 2^16
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;
  bool enabled = true;
};

class GradScaler {
 public:
  explicit GradScaler(GradScalerOptions options = {});

  // loss * scale (the scale is created on the loss' device at the first call).
  Tensor scale(const Tensor& loss);
  // Divides the optimizer's gradients by the scale in place and records Inf/NaN. At most
  // once per optimizer between update()s, and before step().
  void unscale_(Optimizer& optimizer);
  // optimizer.step() unless a gradient of this optimizer was Inf/NaN (decided on the
  // device). At most once per optimizer between update()s.
  void step(Optimizer& optimizer);
  // Adjusts the scale from the found-inf flags of every optimizer stepped since the last
  // update (backoff on any Inf/NaN, growth after growth_interval clean steps), and
  // starts the next iteration. new_scale: set the scale to this instead.
  void update();
  void update(double new_scale);

  // The current scale (reads it back from the device: a sync); init_scale before the
  // first scale(); 1 when disabled.
  double get_scale() const;
  bool is_enabled() const { return options_.enabled; }
  const GradScalerOptions& options() const { return options_; }
  void set_growth_factor(double factor);
  void set_backoff_factor(double factor);
  void set_growth_interval(int64_t interval);

  // PyTorch's keys: {"scale", "growth_factor", "backoff_factor", "growth_interval",
  // "_growth_tracker"}; an empty object when disabled. Loading an empty object, a
  // missing key or a wrong type is a kiln::Error.
  json::Value state_dict() const;
  void load_state_dict(const json::Value& state);

 private:
  enum class Stage { Ready, Unscaled, Stepped };
  struct PerOptimizer {
    Stage stage = Stage::Ready;
    std::vector<Tensor> found_inf_per_device;
  };

  static void check_options(const GradScalerOptions& options);
  void lazy_init(Device device);
  Tensor inverse_scale() const;        // Float32 [1], 1 / scale computed in float64
  Tensor combined_found_inf(const std::vector<Tensor>& per_device) const;  // on the scale's device

  GradScalerOptions options_;
  int64_t init_growth_tracker_ = 0;  // from load_state_dict before the first scale()
  Tensor scale_;           // Float32 [1], undefined until the first scale()
  Tensor growth_tracker_;  // Int32 [1]
  std::unordered_map<const Optimizer*, PerOptimizer> per_optimizer_;
};

}  // namespace kiln::optim
