// BatchNormNd: parameters and buffers, the rank check per 1d/2d/3d, and the training /
// eval logic of Note [Batch norm modes] around kiln::batch_norm (and its fused forms,
// batch_norm_relu and batch_norm_add_relu).
#include "nn/batchnorm.h"

#include <sstream>

#include "core/autograd/checkpoint.h"
#include "core/autograd/grad_mode.h"
#include "core/ops/batch_norm.h"
#include "core/ops/batch_norm_pieces.h"
#include "core/ops/factory.h"
#include "nn/init.h"

namespace kiln::nn {

NormState register_norm_state(Module& layer, int64_t channels, bool affine, bool track_running_stats) {
  NormState state;
  if (affine) {
    state.weight = layer.register_parameter("weight", ones({channels}));
    state.bias = layer.register_parameter("bias", zeros({channels}));
  }
  if (track_running_stats) {
    state.running_mean = layer.register_buffer("running_mean", zeros({channels}));
    state.running_var = layer.register_buffer("running_var", ones({channels}));
    state.num_batches_tracked =
        layer.register_buffer("num_batches_tracked", zeros({}, {.dtype = DType::Int64}));
  }
  return state;
}

BatchNormNd::BatchNormNd(int64_t spatial_dims, const BatchNormOptions& options)
    : spatial_dims_(spatial_dims), options_(options) {
  KILN_CHECK(options.num_features > 0, type_name(), ": num_features must be positive, got ",
             options.num_features);
  KILN_CHECK(options.eps > 0, type_name(), ": eps must be positive, got ", options.eps);
  NormState state =
      register_norm_state(*this, options.num_features, options.affine, options.track_running_stats);
  weight = state.weight;
  bias = state.bias;
  running_mean = state.running_mean;
  running_var = state.running_var;
  num_batches_tracked = state.num_batches_tracked;
}

void BatchNormNd::reset_running_stats() {
  if (!options_.track_running_stats) return;
  NoGradGuard no_grad;
  running_mean.zero_();
  running_var.fill_(1.0);
  num_batches_tracked.zero_();
}

void BatchNormNd::reset_parameters() {
  reset_running_stats();
  if (!options_.affine) return;
  init::ones_(weight);
  init::zeros_(bias);
}

// 1d: [N, C] or [N, C, L]; 2d: [N, C, H, W]; 3d: [N, C, D, H, W] (as PyTorch).
void BatchNormNd::check_input(const Tensor& input) const {
  KILN_CHECK(input.defined(), type_name(), ": undefined input");
  const bool rank_ok = spatial_dims_ < 0    ? input.dim() >= 2
                       : spatial_dims_ == 1 ? (input.dim() == 2 || input.dim() == 3)
                                            : input.dim() == spatial_dims_ + 2;
  KILN_CHECK(rank_ok, type_name(), ": expected a ",
             spatial_dims_ < 0    ? "2-d or higher"
             : spatial_dims_ == 1 ? "2-d or 3-d"
                                  : std::to_string(spatial_dims_ + 2) + "-d",
             " input, got shape ", input.sizes());
  KILN_CHECK(input.size(1) == options_.num_features, type_name(), ": expected ", options_.num_features,
             " channels (dim 1), got shape ", input.sizes());
}

std::string BatchNormNd::type_name() const {
  if (sync_ || spatial_dims_ < 0) return "SyncBatchNorm";
  return "BatchNorm" + std::to_string(spatial_dims_) + "d";
}

Tensor BatchNormNd::forward(const Tensor& input) { return normalize(input, Tensor()); }

Tensor BatchNormNd::forward_add_relu(const Tensor& input, const Tensor& residual) {
  KILN_CHECK(
      !options_.relu, type_name(),
      ": forward_add_relu adds the residual before its ReLU; this layer (relu = true) already has a ReLU "
      "before any add");
  KILN_CHECK(residual.defined(), type_name(), ": forward_add_relu got an undefined residual");
  return normalize(input, residual);
}

Tensor BatchNormNd::call_op(const Tensor& input, const Tensor& residual, const Tensor& mean,
                            const Tensor& var, bool training, double momentum) const {
  if (residual.defined()) {
    return batch_norm_add_relu(input, residual, mean, var, weight, bias, training, momentum, options_.eps);
  }
  const auto op = options_.relu ? batch_norm_relu : batch_norm;
  return op(input, mean, var, weight, bias, training, momentum, options_.eps);
}

Tensor BatchNormNd::normalize(const Tensor& input, const Tensor& residual) {
  check_input(input);
  const bool synchronized = is_training() && sync_ && sync_->active();
  if (is_training() && options_.track_running_stats && checkpoint_recomputing()) {
    // Note [Checkpoint recompute]: the forward already updated the running statistics;
    // the recompute updates copies (the same arithmetic, so the same values) and drops them.
    if (synchronized)
      return synchronized_forward(input, residual, running_mean.clone(), running_var.clone(), 0.0);
    return call_op(input, residual, running_mean.clone(), running_var.clone(), /*training=*/true, 0.0);
  }
  double factor = options_.momentum.value_or(0.0);
  if (is_training() && options_.track_running_stats) {
    {
      NoGradGuard no_grad;
      num_batches_tracked.add_(ones({}, {.dtype = DType::Int64, .device = num_batches_tracked.device()}));
    }
    if (!options_.momentum) factor = 1.0 / static_cast<double>(num_batches_tracked.item<int64_t>());
  }
  const bool use_batch_stats = is_training() || !options_.track_running_stats;
  // The running statistics are updated in training and read in eval; without tracking
  // there are none. Synchronisation is for training only: eval needs no communication.
  if (synchronized) return synchronized_forward(input, residual, running_mean, running_var, factor);
  return call_op(input, residual, running_mean, running_var, use_batch_stats, factor);
}

// kiln::batch_norm's training path with the statistics and the backward's sums combined
// over the processes in between (core/ops/batch_norm_pieces.h). A process's share of the
// batch may be small, even empty: only the total must have more than one value per channel.
Tensor BatchNormNd::synchronized_forward(const Tensor& input, const Tensor& residual, const Tensor& mean,
                                         const Tensor& var, double momentum) {
  namespace bn = batch_norm_pieces;
  const std::string op = type_name();
  bn::check_arguments(op.c_str(), input, mean, var, weight, bias, /*training=*/false);
  const Tensor x = bn::kernel_layout(input);
  const int64_t count = bn::count_per_channel(x);
  bn::Stats stats;
  if (count > 0) {
    stats = bn::local_stats(x);
  } else {
    const TensorOptions per_channel{.dtype = bn::stats_dtype(x.dtype()), .device = x.device()};
    stats = {zeros({options_.num_features}, per_channel), zeros({options_.num_features}, per_channel)};
  }
  const int64_t total = sync_->combine(stats.mean, stats.var, count);
  KILN_CHECK(total > 1, op, ": expected more than 1 value per channel over all processes when training, got ",
             total, " (input shape ", input.sizes(), " here)");
  bn::update_running_stats(mean, var, stats, total, momentum);
  const std::shared_ptr<BatchNormSync> sync = sync_;
  const bool add = residual.defined();
  const bn::Normalization norm{
      .mean = stats.mean,
      .invstd = bn::invstd_of(stats.var, options_.eps),
      .count = total,
      .training = true,
      .grad_sums_hook = [sync](const Tensor& sum_dy,
                               const Tensor& sum_dy_xmu) { sync->sum_gradients(sum_dy, sum_dy_xmu); },
      .relu = options_.relu || add,
      .residual = add ? bn::residual_operand(op.c_str(), residual, x) : Tensor()};
  return bn::batch_norm_normalize(op.c_str(), x, weight, bias, norm);
}

std::string BatchNormNd::extra_repr() const {
  std::ostringstream os;
  os << options_.num_features << ", eps=" << options_.eps << ", momentum=";
  if (options_.momentum)
    os << *options_.momentum;
  else
    os << "None";
  os << ", affine=" << (options_.affine ? "True" : "False")
     << ", track_running_stats=" << (options_.track_running_stats ? "True" : "False");
  if (options_.relu) os << ", relu=True";
  return os.str();
}

}  // namespace kiln::nn
