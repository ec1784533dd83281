// LayerNorm, GroupNorm and InstanceNorm (normalization.h): parameters and buffers made
// and named as PyTorch's, options checked when the layer is made, forward through core.
#include "nn/normalization.h"

#include <sstream>

#include "core/autograd/checkpoint.h"
#include "core/error.h"
#include "core/ops.h"
#include "nn/batchnorm.h"  // register_norm_state

namespace kiln::nn {

LayerNorm::LayerNorm(const LayerNormOptions& options) : options_(options) {
  KILN_CHECK(!options.normalized_shape.empty(), "LayerNorm: normalized_shape is empty");
  for (int64_t s : options.normalized_shape)
    KILN_CHECK(s >= 1, "LayerNorm: normalized_shape ", options.normalized_shape);
  if (options.elementwise_affine) {
    weight = register_parameter("weight", ones(options.normalized_shape));
    bias = register_parameter("bias", zeros(options.normalized_shape));
  }
}

Tensor LayerNorm::forward(const Tensor& input) {
  return layer_norm(input, options_.normalized_shape, weight, bias, options_.eps);
}

std::string LayerNorm::extra_repr() const {
  std::ostringstream os;
  os << shape_str(options_.normalized_shape) << ", eps=" << options_.eps
     << ", elementwise_affine=" << (options_.elementwise_affine ? "True" : "False");
  return os.str();
}

GroupNorm::GroupNorm(const GroupNormOptions& options) : options_(options) {
  KILN_CHECK(
      options.num_groups >= 1 && options.num_channels >= 1 && options.num_channels % options.num_groups == 0,
      "GroupNorm: ", options.num_channels, " channels do not split into ", options.num_groups, " groups");
  if (options.affine) {
    weight = register_parameter("weight", ones({options.num_channels}));
    bias = register_parameter("bias", zeros({options.num_channels}));
  }
}

Tensor GroupNorm::forward(const Tensor& input) {
  KILN_CHECK(input.dim() >= 2 && input.size(1) == options_.num_channels, "GroupNorm: expected [N, ",
             options_.num_channels, ", *], got ", input.sizes());
  return group_norm(input, options_.num_groups, weight, bias, options_.eps);
}

std::string GroupNorm::extra_repr() const {
  std::ostringstream os;
  os << options_.num_groups << ", " << options_.num_channels << ", eps=" << options_.eps
     << ", affine=" << (options_.affine ? "True" : "False");
  return os.str();
}

InstanceNormNd::InstanceNormNd(int64_t spatial_dims, const InstanceNormOptions& options)
    : spatial_dims_(spatial_dims), options_(options) {
  KILN_CHECK(options.num_features >= 1, type_name(), ": num_features must be >= 1, got ",
             options.num_features);
  NormState state =
      register_norm_state(*this, options.num_features, options.affine, options.track_running_stats);
  weight = state.weight;
  bias = state.bias;
  running_mean = state.running_mean;
  running_var = state.running_var;
  num_batches_tracked = state.num_batches_tracked;
}

Tensor InstanceNormNd::forward(const Tensor& input) {
  KILN_CHECK(input.dim() == spatial_dims_ + 2 && input.size(1) == options_.num_features, type_name(),
             ": expected [N, ", options_.num_features, ", ", spatial_dims_, " spatial dims], got ",
             input.sizes());
  // (num_batches_tracked is a buffer for state-dict compatibility only: PyTorch's
  // instance norm never advances it, and momentum is always a factor.)
  const bool use_input_stats = is_training() || !options_.track_running_stats;
  // Note [Checkpoint recompute]: the running statistics are updated in the forward only;
  // the recompute updates copies (the same arithmetic, so the same values), then drops them.
  const bool recompute = use_input_stats && running_mean.defined() && checkpoint_recomputing();
  return instance_norm(input, recompute ? running_mean.clone() : running_mean,
                       recompute ? running_var.clone() : running_var, weight, bias, use_input_stats,
                       options_.momentum, options_.eps);
}

std::string InstanceNormNd::extra_repr() const {
  std::ostringstream os;
  os << options_.num_features << ", eps=" << options_.eps << ", momentum=" << options_.momentum
     << ", affine=" << (options_.affine ? "True" : "False")
     << ", track_running_stats=" << (options_.track_running_stats ? "True" : "False");
  return os.str();
}

}  // namespace kiln::nn
