// Upsample: a layer that resamples its [N, C, s...] input to a size or by a scale factor,
// kiln::interpolate (core/ops/interpolate.h) with the layer's options, as PyTorch's
// nn.Upsample. No parameters.
//
//   Upsample(UpsampleOptions{.scale_factor = {2}, .mode = InterpolateMode::Linear, .align_corners = false});
#pragma once

#include "core/ops/interpolate.h"
#include "nn/layer.h"

namespace kiln::nn {

using UpsampleOptions = InterpolateOptions;

class Upsample : public Layer {
 public:
  explicit Upsample(const UpsampleOptions& options);
  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "Upsample"; }
  std::string extra_repr() const override;

 private:
  UpsampleOptions options_;
};

}  // namespace kiln::nn
