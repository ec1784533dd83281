// Loss functions with PyTorch's semantics, numerically stable: cross_entropy is
// log_softmax (the fused kernel) + nll_loss, binary_cross_entropy_with_logits never
// exponentiates a large positive number. Each takes a Reduction (mean by default).
// Gradient: through the ops they are made of, with respect to input (and target where
// PyTorch gives one: the regression losses and probability targets). Input and a
// per-element target must have the same shape: no broadcasting between them (Note [Loss
// shapes] in loss.cpp; PyTorch only warns).
//
// Options in the order of PyTorch's arguments, as designated initializers, e.g.
// cross_entropy(logits, target, {.label_smoothing = 0.1}):
//   NllLossOptions{.weight = w, .ignore_index = 0, .reduction = Reduction::Sum}
//   CrossEntropyOptions{.ignore_index = 0, .label_smoothing = 0.1}
//   BceWithLogitsOptions{.weight = w, .reduction = Reduction::Sum, .pos_weight = p}
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace kiln {

enum class Reduction : uint8_t { None, Mean, Sum };

struct NllLossOptions {
  Tensor weight{};               // [C] class weights, or undefined
  int64_t ignore_index = -100;   // targets equal to it add nothing (and no weight)
  Reduction reduction = Reduction::Mean;  // Mean divides by the sum of the targets' weights
};
// input: log-probabilities [N, C, d...] or [C]; target: class indices (Int64) [N, d...] or [].
Tensor nll_loss(const Tensor& input, const Tensor& target, const NllLossOptions& options = {});

struct CrossEntropyOptions {
  Tensor weight{};
  int64_t ignore_index = -100;
  Reduction reduction = Reduction::Mean;
  double label_smoothing = 0.0;  // in [0, 1]: mixes the target with the uniform distribution
};
// input: logits [N, C, d...] or [C]; target: class indices (Int64) [N, d...] or class
// probabilities shaped like input (floating).
Tensor cross_entropy(const Tensor& input, const Tensor& target,
                     const CrossEntropyOptions& options = {});

struct BceWithLogitsOptions {
  Tensor weight{};  // broadcast to input: a rescaling weight per element
  Reduction reduction = Reduction::Mean;
  Tensor pos_weight{};  // broadcast along the last (class) dim: weight of positive examples
};
Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target,
                                        const BceWithLogitsOptions& options = {});

Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean);
Tensor l1_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean);
// 0.5 x^2 / beta where |x| < beta, else |x| - 0.5 beta (x = input - target); beta = 0 is l1.
Tensor smooth_l1_loss(const Tensor& input, const Tensor& target,
                      Reduction reduction = Reduction::Mean, double beta = 1.0);

}  // namespace kiln
