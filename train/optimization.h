// Optimization: everything that turns a run's gradients into new weights, as one room: the
// optimizer (train/optimizer_setup.h) prepared for the run's mixed precision (amp_initialize:
// the model cast, master weights), the GradScaler of a float16 run with a dynamic loss
// scale, gradient clipping, and the learning-rate schedule (train/schedule.h).
//
//   train::Optimization optimization(run, model, steps_per_epoch, higher_is_better);
//   optimization.scale(loss).backward();
//   optimization.step();  // every `accumulate` micro-batches
//
// step() is the "optimizer" phase of Note [A training step] (train/trainer.h): unscale and
// clip (the true gradients, on the master weights under O2), the scaler's step (skipped on
// the device after an overflow), its update, gradients to None (update(): device work
// only, what a graphed step captures), then a per-batch scheduler's step (after_update():
// host only). Nothing in it reads back from the device.
#pragma once

#include <cstdint>
#include <memory>

#include "core/json.h"
#include "core/safetensors.h"
#include "nn/layer.h"
#include "optim/grad_scaler.h"
#include "optim/optimizer.h"
#include "train/run_context.h"
#include "train/schedule.h"

namespace kiln::train {

class Optimization {
 public:
  // `model` is on the run's device, in float32; it is cast for the run's opt level here.
  Optimization(const RunContext& run, nn::Layer& model, int64_t steps_per_epoch, bool higher_is_better);

  // loss x the loss scale (loss itself without a dynamic scale).
  Tensor scale(const Tensor& loss);
  void step();  // update(), then after_update()
  void update();
  void after_update();
  // For --cuda-graphs (Note [A graphed step]): the optimizer reads its lr and momentum from
  // the device, and the tensors the scaler keeps across steps.
  void make_capturable() { optimizer_->set_capturable(true); }
  std::vector<Tensor> scaler_tensors() const { return scaler_->persistent_tensors(); }
  // What a captured step takes from the scaler on the host: its options.
  std::vector<double> scaler_signature() const;

  optim::Optimizer& optimizer() { return *optimizer_; }
  Schedule& schedule() { return *schedule_; }
  double lr() const { return schedule_->lr(); }
  // The loss scale now (1 without a dynamic scale): reads the scale back, a sync.
  double loss_scale() const;

  // For checkpoints (Note [Checkpoint layout]): the optimizer's tensors and param groups,
  // the scheduler's and the scaler's state.
  optim::OptimizerStateDict optimizer_state() const { return optimizer_->state_dict(); }
  json::Value scheduler_state() const { return schedule_->state_dict(); }
  json::Value scaler_state() const { return scaler_->state_dict(); }
  void load(const optim::OptimizerStateDict& optimizer, const json::Value& scheduler, const json::Value& scaler);

 private:
  Device device_;
  double clip_grad_norm_, clip_grad_value_;
  std::unique_ptr<optim::Optimizer> optimizer_;
  std::unique_ptr<optim::GradScaler> scaler_;
  std::unique_ptr<Schedule> schedule_;
};

}  // namespace kiln::train
