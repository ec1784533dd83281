// Loss modules: register the weights as buffers, then call the functional loss with the
// buffers' current handles (so to() and load_state_dict reach them). The segmentation
// losses check their weights' values once, here.
#include "nn/loss.h"

namespace kiln::nn {

CrossEntropyLoss::CrossEntropyLoss(const CrossEntropyLossOptions& options) : options_(options) {
  if (options.weight.defined()) options_.weight = register_buffer("weight", options.weight);
}
Tensor CrossEntropyLoss::forward(const Tensor& input, const Tensor& target) {
  return cross_entropy(input, target, options_);
}

NLLLoss::NLLLoss(const NLLLossOptions& options) : options_(options) {
  if (options.weight.defined()) options_.weight = register_buffer("weight", options.weight);
}
Tensor NLLLoss::forward(const Tensor& input, const Tensor& target) { return nll_loss(input, target, options_); }

BCEWithLogitsLoss::BCEWithLogitsLoss(const BCEWithLogitsLossOptions& options) : options_(options) {
  if (options.weight.defined()) options_.weight = register_buffer("weight", options.weight);
  if (options.pos_weight.defined()) options_.pos_weight = register_buffer("pos_weight", options.pos_weight);
}
Tensor BCEWithLogitsLoss::forward(const Tensor& input, const Tensor& target) {
  return binary_cross_entropy_with_logits(input, target, options_);
}

Tensor MSELoss::forward(const Tensor& input, const Tensor& target) {
  return mse_loss(input, target, options_.reduction);
}

Tensor L1Loss::forward(const Tensor& input, const Tensor& target) { return l1_loss(input, target, options_.reduction); }

SmoothL1Loss::SmoothL1Loss(const SmoothL1LossOptions& options) : options_(options) {
  KILN_CHECK(options.beta >= 0, "SmoothL1Loss: beta must be non-negative, got ", options.beta);
}
Tensor SmoothL1Loss::forward(const Tensor& input, const Tensor& target) {
  return smooth_l1_loss(input, target, options_.reduction, options_.beta);
}

namespace {

// The buffer registered for a checked class weight (or alpha), or undefined.
Tensor checked_buffer(Module& module, const char* name, const Tensor& values, const char* op) {
  if (!values.defined()) return values;
  check_non_negative_values(values, name, op);
  return module.register_buffer(name, values);
}

}  // namespace

DiceLoss::DiceLoss(const DiceLossOptions& options) : options_(options) {
  options_.weight = checked_buffer(*this, "weight", options.weight, "DiceLoss");
}
Tensor DiceLoss::forward(const Tensor& input, const Tensor& target) {
  return dice_loss(input, target, options_);
}

FocalLoss::FocalLoss(const FocalLossOptions& options) : options_(options) {
  options_.weight = checked_buffer(*this, "weight", options.weight, "FocalLoss");
  options_.alpha_per_class = checked_buffer(*this, "alpha_per_class", options.alpha_per_class, "FocalLoss");
}
Tensor FocalLoss::forward(const Tensor& input, const Tensor& target) {
  return focal_loss(input, target, options_);
}

DiceCELoss::DiceCELoss(const DiceCELossOptions& options) : options_(options) {
  options_.dice.weight = checked_buffer(*this, "weight", options.dice.weight, "DiceCELoss");
}
Tensor DiceCELoss::forward(const Tensor& input, const Tensor& target) {
  return dice_ce_loss(input, target, options_);
}

DiceFocalLoss::DiceFocalLoss(const DiceFocalLossOptions& options) : options_(options) {
  options_.dice.weight = checked_buffer(*this, "weight", options.dice.weight, "DiceFocalLoss");
}
Tensor DiceFocalLoss::forward(const Tensor& input, const Tensor& target) {
  return dice_focal_loss(input, target, options_);
}

}  // namespace kiln::nn
