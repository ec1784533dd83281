// Conv1d / Conv2d / Conv3d over kiln::convolution (core/ops/conv.h) and ConvTranspose1d /
// 2d / 3d over kiln::conv_transpose (core/ops/conv_transpose.h), channels first. Options
// take one value per spatial dim or one value for all ({3} is 3x3x3 in Conv3d). Weight
// [out_channels, in_channels / groups, k...] (transposed: [in_channels, out_channels /
// groups, k...]), bias [out_channels], initialised as PyTorch's (Note [Default layer
// initialisation] in linear.cpp), parameter names and printed form as PyTorch's.
//
//   Conv3d conv(Conv3dOptions{.in_channels = 1, .out_channels = 16, .kernel_size = {3}, .padding = {1}});
//   ConvTranspose3d up(ConvTranspose3dOptions{.in_channels = 16, .out_channels = 8, .kernel_size = {2}, .stride = {2}});
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

// PyTorch's ConvTranspose arguments, in its order: output_padding (added to one side of
// the output, < stride or < dilation) and dilation after groups and bias.
struct ConvTransposeOptions {
  int64_t in_channels = 0;
  int64_t out_channels = 0;
  std::vector<int64_t> kernel_size{};
  std::vector<int64_t> stride = {1};
  std::vector<int64_t> padding = {0};
  std::vector<int64_t> output_padding = {0};
  int64_t groups = 1;
  bool bias = true;
  std::vector<int64_t> dilation = {1};
};
using ConvTranspose1dOptions = ConvTransposeOptions;
using ConvTranspose2dOptions = ConvTransposeOptions;
using ConvTranspose3dOptions = ConvTransposeOptions;

// The shared body of Conv1d/2d/3d and ConvTranspose1d/2d/3d, for `spatial_dims` = 1, 2
// or 3 (as PyTorch's _ConvNd).
class ConvNd : public Layer {
 public:
  // input [N, C_in, s...] or unbatched [C_in, s...] -> [N, C_out, o...].
  Tensor forward(const Tensor& input) override;
  void reset_parameters(Generator* generator = nullptr);
  std::string type_name() const override;
  std::string extra_repr() const override;
  // The options with every per-dim list expanded to spatial_dims values.
  const ConvOptions& options() const { return options_; }

  Tensor weight;  // [out_channels, in_channels / groups, k...]; transposed [in, out / groups, k...]
  Tensor bias;    // [out_channels], or undefined without bias

 protected:
  ConvNd(int64_t spatial_dims, const ConvOptions& options);
  // A transposed convolution, with its output_padding (one value per dim or one for all).
  ConvNd(int64_t spatial_dims, const ConvTransposeOptions& options);
  int64_t spatial_dims() const { return spatial_dims_; }
  const std::vector<int64_t>& output_padding() const { return output_padding_; }
  void check_input(const Tensor& input) const;

 private:
  void init(const ConvOptions& options);

  int64_t spatial_dims_;
  bool transposed_ = false;
  ConvOptions options_;
  std::vector<int64_t> output_padding_;  // transposed only
};

// The shared body of ConvTranspose1d/2d/3d.
class ConvTransposeNd : public ConvNd {
 public:
  using ConvNd::forward;
  using ConvNd::output_padding;
  // As forward, with the output_padding that gives `output_size` (the spatial sizes, or
  // [N, C, s...]) instead of the module's: the way to undo a strided convolution whose
  // input size the stride did not divide. A size outside [min, min + stride - 1] (min:
  // output_padding 0) is an error naming the valid range.
  Tensor forward(const Tensor& input, const std::vector<int64_t>& output_size);

 protected:
  ConvTransposeNd(int64_t spatial_dims, const ConvTransposeOptions& options) : ConvNd(spatial_dims, options) {}
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

class ConvTranspose1d : public ConvTransposeNd {
 public:
  explicit ConvTranspose1d(const ConvTranspose1dOptions& options) : ConvTransposeNd(1, options) {}
};
class ConvTranspose2d : public ConvTransposeNd {
 public:
  explicit ConvTranspose2d(const ConvTranspose2dOptions& options) : ConvTransposeNd(2, options) {}
};
class ConvTranspose3d : public ConvTransposeNd {
 public:
  explicit ConvTranspose3d(const ConvTranspose3dOptions& options) : ConvTransposeNd(3, options) {}
};

}  // namespace kiln::nn
