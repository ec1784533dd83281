// Pooling layers over core/ops/pool.h, channels first: MaxPool1d/2d/3d,
// AvgPool1d/2d/3d and AdaptiveAvgPool1d/2d/3d. Sizes take one value per spatial dim or
// one for all; an empty stride means stride = kernel_size (as PyTorch's default).
//
// Options in PyTorch's order, as designated initializers:
//   MaxPool3d(MaxPool3dOptions{.kernel_size = {3}, .stride = {2}, .padding = {1}});
//   AvgPool3d(AvgPool3dOptions{.kernel_size = {2}, .count_include_pad = false});
//   AdaptiveAvgPool3d(AdaptiveAvgPool3dOptions{.output_size = {1}});
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "nn/layer.h"

namespace kiln::nn {

struct MaxPoolOptions {
  std::vector<int64_t> kernel_size{};
  std::vector<int64_t> stride = {};
  std::vector<int64_t> padding = {0};
  std::vector<int64_t> dilation = {1};
  bool ceil_mode = false;
};
using MaxPool1dOptions = MaxPoolOptions;
using MaxPool2dOptions = MaxPoolOptions;
using MaxPool3dOptions = MaxPoolOptions;

class MaxPoolNd : public Layer {
 public:
  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "MaxPool" + std::to_string(spatial_dims_) + "d"; }
  std::string extra_repr() const override;

 protected:
  MaxPoolNd(int64_t spatial_dims, const MaxPoolOptions& options);

 private:
  int64_t spatial_dims_;
  MaxPoolOptions options_;
};
class MaxPool1d : public MaxPoolNd {
 public:
  explicit MaxPool1d(const MaxPool1dOptions& options) : MaxPoolNd(1, options) {}
};
class MaxPool2d : public MaxPoolNd {
 public:
  explicit MaxPool2d(const MaxPool2dOptions& options) : MaxPoolNd(2, options) {}
};
class MaxPool3d : public MaxPoolNd {
 public:
  explicit MaxPool3d(const MaxPool3dOptions& options) : MaxPoolNd(3, options) {}
};

struct AvgPoolOptions {
  std::vector<int64_t> kernel_size{};
  std::vector<int64_t> stride = {};
  std::vector<int64_t> padding = {0};
  bool ceil_mode = false;
  bool count_include_pad = true;
  std::optional<int64_t> divisor_override = std::nullopt;  // 2d and 3d only
};
using AvgPool1dOptions = AvgPoolOptions;
using AvgPool2dOptions = AvgPoolOptions;
using AvgPool3dOptions = AvgPoolOptions;

class AvgPoolNd : public Layer {
 public:
  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "AvgPool" + std::to_string(spatial_dims_) + "d"; }
  std::string extra_repr() const override;

 protected:
  AvgPoolNd(int64_t spatial_dims, const AvgPoolOptions& options);

 private:
  int64_t spatial_dims_;
  AvgPoolOptions options_;
};
class AvgPool1d : public AvgPoolNd {
 public:
  explicit AvgPool1d(const AvgPool1dOptions& options) : AvgPoolNd(1, options) {}
};
class AvgPool2d : public AvgPoolNd {
 public:
  explicit AvgPool2d(const AvgPool2dOptions& options) : AvgPoolNd(2, options) {}
};
class AvgPool3d : public AvgPoolNd {
 public:
  explicit AvgPool3d(const AvgPool3dOptions& options) : AvgPoolNd(3, options) {}
};

struct AdaptiveAvgPoolOptions {
  std::vector<int64_t> output_size{};
};
using AdaptiveAvgPool1dOptions = AdaptiveAvgPoolOptions;
using AdaptiveAvgPool2dOptions = AdaptiveAvgPoolOptions;
using AdaptiveAvgPool3dOptions = AdaptiveAvgPoolOptions;

class AdaptiveAvgPoolNd : public Layer {
 public:
  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "AdaptiveAvgPool" + std::to_string(spatial_dims_) + "d"; }
  std::string extra_repr() const override;

 protected:
  AdaptiveAvgPoolNd(int64_t spatial_dims, const AdaptiveAvgPoolOptions& options);

 private:
  int64_t spatial_dims_;
  AdaptiveAvgPoolOptions options_;
};
class AdaptiveAvgPool1d : public AdaptiveAvgPoolNd {
 public:
  explicit AdaptiveAvgPool1d(const AdaptiveAvgPool1dOptions& options) : AdaptiveAvgPoolNd(1, options) {}
};
class AdaptiveAvgPool2d : public AdaptiveAvgPoolNd {
 public:
  explicit AdaptiveAvgPool2d(const AdaptiveAvgPool2dOptions& options) : AdaptiveAvgPoolNd(2, options) {}
};
class AdaptiveAvgPool3d : public AdaptiveAvgPoolNd {
 public:
  explicit AdaptiveAvgPool3d(const AdaptiveAvgPool3dOptions& options) : AdaptiveAvgPoolNd(3, options) {}
};

}  // namespace kiln::nn
