// Loss modules: register the weights as buffers, then call the functional loss with the
// buffers' current handles (so to() and load_state_dict reach them).
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

}  // namespace kiln::nn
