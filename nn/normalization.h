// LayerNorm, GroupNorm and InstanceNorm1d/2d/3d over core's layer_norm, group_norm and
// instance_norm (core/ops/normalization.h), with PyTorch's parameter and buffer names and
// defaults, so state dicts move both ways:
//   LayerNorm      weight (ones), bias (zeros) of normalized_shape when elementwise_affine;
//   GroupNorm      weight, bias [C] when affine;
//   InstanceNorm   weight, bias [C] when affine (off by default); running_mean,
//                  running_var and num_batches_tracked when track_running_stats (off by
//                  default): training updates the statistics, eval normalises with them;
//                  num_batches_tracked stays 0, as PyTorch's instance norm leaves it.
//
//   GroupNorm norm(GroupNormOptions{.num_groups = 8, .num_channels = 64});
//   LayerNorm ln(LayerNormOptions{.normalized_shape = {512}});
//   InstanceNorm3d in(InstanceNormOptions{.num_features = 32, .affine = true});
#pragma once

#include <cstdint>
#include <vector>

#include "nn/layer.h"

namespace kiln::nn {

struct LayerNormOptions {
  std::vector<int64_t> normalized_shape = {};
  double eps = 1e-5;
  bool elementwise_affine = true;
};

class LayerNorm : public Layer {
 public:
  explicit LayerNorm(const LayerNormOptions& options);
  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "LayerNorm"; }
  std::string extra_repr() const override;
  Tensor weight, bias;

 private:
  LayerNormOptions options_;
};

struct GroupNormOptions {
  int64_t num_groups = 0;
  int64_t num_channels = 0;
  double eps = 1e-5;
  bool affine = true;
};

class GroupNorm : public Layer {
 public:
  explicit GroupNorm(const GroupNormOptions& options);
  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "GroupNorm"; }
  std::string extra_repr() const override;
  Tensor weight, bias;

 private:
  GroupNormOptions options_;
};

struct InstanceNormOptions {
  int64_t num_features = 0;
  double eps = 1e-5;
  double momentum = 0.1;
  bool affine = false;
  bool track_running_stats = false;
};
using InstanceNorm1dOptions = InstanceNormOptions;
using InstanceNorm2dOptions = InstanceNormOptions;
using InstanceNorm3dOptions = InstanceNormOptions;

// The shared body of InstanceNorm1d/2d/3d: inputs [N, C, s...] with `spatial_dims` dims.
class InstanceNormNd : public Layer {
 public:
  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "InstanceNorm" + std::to_string(spatial_dims_) + "d"; }
  std::string extra_repr() const override;
  Tensor weight, bias;                                    // [C] (affine)
  Tensor running_mean, running_var, num_batches_tracked;  // (track_running_stats)

 protected:
  InstanceNormNd(int64_t spatial_dims, const InstanceNormOptions& options);

 private:
  int64_t spatial_dims_;
  InstanceNormOptions options_;
};

class InstanceNorm1d : public InstanceNormNd {
 public:
  explicit InstanceNorm1d(const InstanceNorm1dOptions& options) : InstanceNormNd(1, options) {}
};
class InstanceNorm2d : public InstanceNormNd {
 public:
  explicit InstanceNorm2d(const InstanceNorm2dOptions& options) : InstanceNormNd(2, options) {}
};
class InstanceNorm3d : public InstanceNormNd {
 public:
  explicit InstanceNorm3d(const InstanceNorm3dOptions& options) : InstanceNormNd(3, options) {}
};

}  // namespace kiln::nn
