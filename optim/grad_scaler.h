// GradScaler: dynamic loss scaling for float16 training, as torch.amp.GradScaler.
//
// Float16 gradients of small magnitude underflow to zero. The scaler multiplies the loss
// by a large factor S before backward, so every gradient is computed S times larger, and
// divides them by S again before the optimizer uses them. S adapts: a step whose
// gradients hold an Inf or NaN (S was too large) is skipped and S is multiplied by
// backoff_factor, but never below min_scale (Note [GradScaler min_scale]); after
// growth_interval clean steps in a row, S is multiplied by growth_factor.
//
//   GradScaler scaler;                       // init_scale 2^16, growth 2, backoff 0.5, 2000
//   GradScaler custom(GradScalerOptions{.init_scale = 1024.0, .growth_interval = 500});
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
// Note [GradScaler min_scale]: a floor under the scale, Kiln's own (PyTorch's scale has
// none). Without it, a long run of steps whose gradients hold Inf/NaN (a NaN in the data,
// a model that diverged) halves the scale until float32 rounds it to 0 (166 backoffs from
// 2^16); the next finite step then unscales by 1/0 = inf and 0 * inf writes NaN into every
// weight. So a backoff gives max(scale * backoff_factor, min_scale), and the scale is
// never below min_scale: init_scale, update(new_scale), set_min_scale() and
// load_state_dict() all keep it so. The default, 2^-24, is float16's smallest subnormal:
// at that scale a true gradient of 1 becomes the smallest float16 step and every one of
// magnitude <= 1/2 already underflows to 0, so a smaller scale could only trade still more
// underflow for less overflow; and what still overflows at 2^-24 is above
// 65504 * 2^24 ~ 2^40, i.e. an Inf or NaN from the forward pass or the data, which no
// scale removes. 2^-24 is also a power of two (scaling and unscaling stay exact), a
// normal float32 with a finite reciprocal (2^24), and 40 backoffs below the default
// init_scale, so it only matters to a run that has been skipping steps for a long time.
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

// PyTorch's arguments in PyTorch's order, then Kiln's own.
struct GradScalerOptions {
  double init_scale = 65536.0;  // 2^16
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;
  bool enabled = true;
  double min_scale = 0x1p-24;  // Kiln only: a backoff never goes below it (Note [GradScaler min_scale])
};

class GradScaler {
 public:
  explicit GradScaler(GradScalerOptions options = {});

  // loss * scale, with the scale as a float32 [] tensor (PyTorch 2.x's type promotion: a
  // float16 [] loss gives float32); created on the loss' device at the first call.
  Tensor scale(const Tensor& loss);
  // Divides the optimizer's gradients by the scale in place and records Inf/NaN. At most
  // once per optimizer between update()s, and before step().
  void unscale_(Optimizer& optimizer);
  // optimizer.step() unless a gradient of this optimizer was Inf/NaN (decided on the
  // device). At most once per optimizer between update()s.
  void step(Optimizer& optimizer);
  // Adjusts the scale from the found-inf flags of every optimizer stepped since the last
  // update (backoff on any Inf/NaN, growth after growth_interval clean steps), and
  // starts the next iteration. new_scale: set the scale to this instead (>= min_scale).
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
  // Must not exceed init_scale nor the current scale (reads it back: a sync).
  void set_min_scale(double min_scale);

  // PyTorch's keys: {"scale", "growth_factor", "backoff_factor", "growth_interval",
  // "_growth_tracker"}, plus Kiln's "min_scale"; an empty object when disabled. PyTorch's
  // load_state_dict reads its keys by name, so it takes ours, and ours takes PyTorch's: a
  // state without "min_scale" keeps the scaler's own. Loading into a disabled scaler does
  // nothing (as PyTorch); otherwise an empty object, a missing key, a wrong type or a
  // scale below min_scale is a kiln::Error and changes nothing.
  json::Value state_dict() const;
  void load_state_dict(const json::Value& state);

  // The tensors the scaler keeps across steps (the scale and its growth tracker, once
  // made): what a step captured by a CUDA graph updates in place (train/graphed_step.h).
  std::vector<Tensor> persistent_tensors() const;

 private:
  enum class Stage { Ready, Unscaled, Stepped };
  struct PerOptimizer {
    Stage stage = Stage::Ready;
    std::vector<Tensor> found_inf_per_device;
  };

  static void check_options(const GradScalerOptions& options);
  // options_.*option = value when the options stay valid, else a kiln::Error.
  template <typename T>
  void set_option(T GradScalerOptions::*option, T value);
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
