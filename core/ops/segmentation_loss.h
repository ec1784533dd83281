// Segmentation losses with MONAI's definitions (monai.losses 1.6: DiceLoss, FocalLoss,
// DiceCELoss, DiceFocalLoss), composed from existing ops, so their gradients are those of
// the ops they are made of. Input: the network's output [B, N, d...] (at least one spatial
// dim); target: one-hot or soft [B, N, d...], or a label map [B, 1, d...] with
// `to_onehot_y` (any dtype; floating labels are truncated as MONAI's one_hot does). The
// option fields are MONAI's arguments, in MONAI's order, as designated initializers:
//
//   DiceLossOptions{.to_onehot_y = true, .softmax = true, .batch = true}
//   FocalLossOptions{.gamma = 1.5, .alpha = 0.25, .reduction = Reduction::Sum}
//   DiceCeLossOptions{.dice = {.to_onehot_y = true, .softmax = true}, .lambda_ce = 0.5}
//   DiceFocalLossOptions{.dice = {.sigmoid = true}, .gamma = 1.0, .lambda_focal = 2.0}
//
// Class weights (`weight`) and per-class alphas are tensors: 0-d (one value for every
// class) or [N'] (N' = N, or N - 1 without the background), on the input's device (a 0-d
// CPU tensor joins any device). Their values must be non-negative: checked here when they
// live on the CPU, and by the nn modules (nn/loss.h) when they are built. Every loss is an
// autocast float32 op. Note [Segmentation losses] in segmentation_loss.cpp has the formulas
// and where Kiln departs from MONAI (errors where MONAI would index out of range).
#pragma once

#include <cstdint>
#include <optional>

#include "core/ops/loss.h"
#include "core/tensor.h"

namespace kiln {

struct DiceLossOptions {
  bool include_background = true;         // false drops channel 0 of input and target
  bool to_onehot_y = false;               // the target is a label map [B, 1, d...]
  bool sigmoid = false;                   // applied to the input first
  bool softmax = false;                   // over the channels (not both)
  bool squared_pred = false;              // squares in the denominator (V-Net's Dice)
  bool jaccard = false;                   // 1 - |p g| / (|p| + |g| - |p g|)
  Reduction reduction = Reduction::Mean;  // None: [B, N', 1...] ([N', 1...] with batch)
  double smooth_nr = 1e-5;                // added to the numerator
  double smooth_dr = 1e-5;                // added to the denominator
  bool batch = false;                     // sum over the batch before dividing
  Tensor weight{};                        // class weights (unused with one class)
  bool soft_label = false;                // the norm form, exact for soft targets
  std::optional<int64_t> ignore_index{};  // voxels with this label count for no class
};
Tensor dice_loss(const Tensor& input, const Tensor& target, const DiceLossOptions& options = {});

struct FocalLossOptions {
  bool include_background = true;
  bool to_onehot_y = false;
  double gamma = 2.0;                     // focusing exponent, >= 0
  std::optional<double> alpha{};          // MONAI's scalar alpha
  Tensor alpha_per_class{};               // MONAI's sequence alpha: [N'] (not with `alpha`)
  Tensor weight{};                        // 0-d or [N'] class weights
  Reduction reduction = Reduction::Mean;  // Sum: the spatial mean, summed (MONAI's)
  bool use_softmax = false;               // softmax focal loss, else per-channel sigmoid
  std::optional<int64_t> ignore_index{};
};
Tensor focal_loss(const Tensor& input, const Tensor& target, const FocalLossOptions& options = {});

// lambda_dice * Dice + lambda_ce * cross-entropy (class indices when the target is a
// label map, probabilities when it is one-hot; binary cross-entropy with pos_weight =
// weight for a one-channel input). The class weight is dice.weight, given for all N
// classes (Dice drops the background's). Reduction Mean or Sum; no ignore_index.
struct DiceCeLossOptions {
  DiceLossOptions dice{};
  double lambda_dice = 1.0;
  double lambda_ce = 1.0;
  double label_smoothing = 0.0;
};
Tensor dice_ce_loss(const Tensor& input, const Tensor& target, const DiceCeLossOptions& options = {});

// lambda_dice * Dice + lambda_focal * sigmoid focal loss, the target one-hot encoded once;
// the focal loss shares dice's include_background, weight and reduction. No ignore_index.
struct DiceFocalLossOptions {
  DiceLossOptions dice{};
  double gamma = 2.0;
  double lambda_dice = 1.0;
  double lambda_focal = 1.0;
  std::optional<double> alpha{};
};
Tensor dice_focal_loss(const Tensor& input, const Tensor& target, const DiceFocalLossOptions& options = {});

// A label map [B, 1, d...] as one-hot [B, classes, d...] of `dtype`; a label outside
// [0, classes) is a kiln::Error naming `op` and the label.
Tensor one_hot(const Tensor& labels, int64_t classes, DType dtype, const char* op = "one_hot");

// Checks a class-weight or alpha tensor's values are finite and non-negative (reads them:
// the nn modules call it once, when they are built).
void check_non_negative_values(const Tensor& values, const char* name, const char* op);

}  // namespace kiln
