// Dropout layers: Dropout zeroes single elements, Dropout3d whole channels of a volume
// ([N, C, D, H, W] or unbatched [C, D, H, W]); both scale the kept values by 1 / (1 - p)
// in training and are the identity in eval.
//
//   Dropout(DropoutOptions{.p = 0.2, .generator = &generator});  // generator: Kiln only, after PyTorch's
#pragma once

#include "nn/layer.h"

namespace kiln::nn {

struct DropoutOptions {
  double p = 0.5;  // probability of zeroing, in [0, 1]
  Generator* generator = nullptr;  // the input's device's default generator when null
};

using Dropout3dOptions = DropoutOptions;

class Dropout : public Layer {
 public:
  explicit Dropout(const DropoutOptions& options = {});
  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "Dropout"; }
  std::string extra_repr() const override;

 private:
  DropoutOptions options_;
};

class Dropout3d : public Layer {
 public:
  explicit Dropout3d(const DropoutOptions& options = {});
  // In training: input * mask / (1 - p) with one Bernoulli(1 - p) draw per (n, c),
  // broadcast over D, H, W (so the gradient is zero on dropped channels).
  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "Dropout3d"; }
  std::string extra_repr() const override;

 private:
  DropoutOptions options_;
};

}  // namespace kiln::nn
