// Conv1d / Conv2d / Conv3d over kiln::convolution (core/ops/conv.h), channels first.
// Options take one value per spatial dim or one value for all ({3} is 3x3x3 in Conv3d).
// Weight [out_channels, in_channels / groups, k...], bias [out_channels], initialised as
// PyTorch's (Note [Default layer initialisation] in linear.cpp).
//
//   Conv3d conv(Conv3dOptions{.in_channels = 1, .out_channels = 16, .kernel_size = {3}, .padding = {1}});
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "nn/layer.h"

namespace kiln::nn {

struct ConvOptions {
  int64_t in_channels = 0;
  int64_t out_channels = 0;
  std::vector<int64_t> kernel_size{};
  std::vector<int64_t> stride = {1};
  std::vector<int64_t> padding = {0};
  std::vector<int64_t> dilation = {1};
  int64_t groups = 1;
  bool bias = true;
};
using Conv1dOptions = ConvOptions;
using Conv2dOptions = ConvOptions;
using Conv3dOptions = ConvOptions;

// The shared body of Conv1d/2d/3d, for `spatial_dims` = 1, 2 or 3.
class ConvNd : public Layer {
 public:
  // input [N, C_in, s...] or unbatched [C_in, s...] -> [N, C_out, o...].
  Tensor forward(const Tensor& input) override;
  void reset_parameters(Generator* generator = nullptr);
  std::string type_name() const override { return "Conv" + std::to_string(spatial_dims_) + "d"; }
  std::string extra_repr() const override;
  // The options with every per-dim list expanded to spatial_dims values.
  const ConvOptions& options() const { return options_; }

  Tensor weight;  // [out_channels, in_channels / groups, k...]
  Tensor bias;    // [out_channels], or undefined without bias

 protected:
  ConvNd(int64_t spatial_dims, const ConvOptions& options);

 private:
  int64_t spatial_dims_;
  ConvOptions options_;
};

class Conv1d : public ConvNd {
 public:
  explicit Conv1d(const Conv1dOptions& options) : ConvNd(1, options) {}
};
class Conv2d : public ConvNd {
 public:
  explicit Conv2d(const Conv2dOptions& options) : ConvNd(2, options) {}
};
class Conv3d : public ConvNd {
 public:
  explicit Conv3d(const Conv3dOptions& options) : ConvNd(3, options) {}
};

}  // namespace kiln::nn
