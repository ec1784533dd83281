// Losses as modules, holding their options (core/ops/loss.h has the math). As in
// PyTorch, class weights (`weight`) and BCE's `pos_weight` are registered as buffers, so
// they move with to() and are saved in the state dict. forward(input, target).
//
// Options in PyTorch's order, as designated initializers:
//   BCEWithLogitsLoss(BCEWithLogitsLossOptions{.weight = w, .reduction = Reduction::Sum, .pos_weight = p});
//   MSELoss(MSELossOptions{.reduction = Reduction::Sum});
//   SmoothL1Loss(SmoothL1LossOptions{.reduction = Reduction::Sum, .beta = 0.5});
//   DiceCELoss(DiceCELossOptions{.dice = {.to_onehot_y = true, .softmax = true}});
// The segmentation losses (MONAI's DiceLoss, FocalLoss, DiceCELoss, DiceFocalLoss) check
// their weights' and alphas' values when built, wherever those live.
#pragma once

#include "core/ops/loss.h"
#include "core/ops/segmentation_loss.h"
#include "nn/module.h"

namespace kiln::nn {

// A loss module: forward(input, target) -> loss.
class Loss : public Module {
 public:
  virtual Tensor forward(const Tensor& input, const Tensor& target) = 0;
  Tensor operator()(const Tensor& input, const Tensor& target) { return forward(input, target); }
};

using CrossEntropyLossOptions = CrossEntropyOptions;
class CrossEntropyLoss : public Loss {
 public:
  explicit CrossEntropyLoss(const CrossEntropyLossOptions& options = {});
  Tensor forward(const Tensor& input, const Tensor& target) override;
  std::string type_name() const override { return "CrossEntropyLoss"; }

 private:
  CrossEntropyLossOptions options_;  // its weight is the buffer's handle
};

using NLLLossOptions = NllLossOptions;
class NLLLoss : public Loss {
 public:
  explicit NLLLoss(const NLLLossOptions& options = {});
  Tensor forward(const Tensor& input, const Tensor& target) override;
  std::string type_name() const override { return "NLLLoss"; }

 private:
  NLLLossOptions options_;
};

using BCEWithLogitsLossOptions = BceWithLogitsOptions;
class BCEWithLogitsLoss : public Loss {
 public:
  explicit BCEWithLogitsLoss(const BCEWithLogitsLossOptions& options = {});
  Tensor forward(const Tensor& input, const Tensor& target) override;
  std::string type_name() const override { return "BCEWithLogitsLoss"; }

 private:
  BCEWithLogitsLossOptions options_;
};

struct RegressionLossOptions {
  Reduction reduction = Reduction::Mean;
};
using MSELossOptions = RegressionLossOptions;
using L1LossOptions = RegressionLossOptions;

class MSELoss : public Loss {
 public:
  explicit MSELoss(const MSELossOptions& options = {}) : options_(options) {}
  Tensor forward(const Tensor& input, const Tensor& target) override;
  std::string type_name() const override { return "MSELoss"; }

 private:
  MSELossOptions options_;
};

class L1Loss : public Loss {
 public:
  explicit L1Loss(const L1LossOptions& options = {}) : options_(options) {}
  Tensor forward(const Tensor& input, const Tensor& target) override;
  std::string type_name() const override { return "L1Loss"; }

 private:
  L1LossOptions options_;
};

struct SmoothL1LossOptions {
  Reduction reduction = Reduction::Mean;
  double beta = 1.0;
};
class SmoothL1Loss : public Loss {
 public:
  explicit SmoothL1Loss(const SmoothL1LossOptions& options = {});
  Tensor forward(const Tensor& input, const Tensor& target) override;
  std::string type_name() const override { return "SmoothL1Loss"; }

 private:
  SmoothL1LossOptions options_;
};

using DiceLossOptions = kiln::DiceLossOptions;
class DiceLoss : public Loss {
 public:
  explicit DiceLoss(const DiceLossOptions& options = {});
  Tensor forward(const Tensor& input, const Tensor& target) override;
  std::string type_name() const override { return "DiceLoss"; }

 private:
  DiceLossOptions options_;
};

using FocalLossOptions = kiln::FocalLossOptions;
class FocalLoss : public Loss {
 public:
  explicit FocalLoss(const FocalLossOptions& options = {});
  Tensor forward(const Tensor& input, const Tensor& target) override;
  std::string type_name() const override { return "FocalLoss"; }

 private:
  FocalLossOptions options_;
};

using DiceCELossOptions = DiceCeLossOptions;
class DiceCELoss : public Loss {
 public:
  explicit DiceCELoss(const DiceCELossOptions& options = {});
  Tensor forward(const Tensor& input, const Tensor& target) override;
  std::string type_name() const override { return "DiceCELoss"; }

 private:
  DiceCELossOptions options_;
};

using DiceFocalLossOptions = kiln::DiceFocalLossOptions;
class DiceFocalLoss : public Loss {
 public:
  explicit DiceFocalLoss(const DiceFocalLossOptions& options = {});
  Tensor forward(const Tensor& input, const Tensor& target) override;
  std::string type_name() const override { return "DiceFocalLoss"; }

 private:
  DiceFocalLossOptions options_;
};

}  // namespace kiln::nn
