// BatchNorm1d / 2d / 3d over kiln::batch_norm (core/ops/batch_norm.h), as PyTorch's:
// parameters weight (ones) and bias (zeros) when affine; buffers running_mean (zeros),
// running_var (ones) and num_batches_tracked (an Int64 scalar) when
// track_running_stats.
//
// Note [Batch norm modes]: in training the layer normalises with the batch's statistics;
// with track_running_stats it also adds 1 to num_batches_tracked and updates the running
// statistics with factor `momentum`, or, when momentum is nullopt, with 1 /
// num_batches_tracked (a cumulative moving average: the running values are the mean of
// every batch's so far). In eval it normalises with the running statistics, or with the
// batch's when it tracks none.
//
// Options in PyTorch's order, as designated initializers:
//   BatchNorm3d bn(BatchNorm3dOptions{.num_features = 64, .eps = 1e-3, .momentum = std::nullopt});
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "nn/layer.h"

namespace kiln::nn {

struct BatchNormOptions {
  int64_t num_features = 0;
  double eps = 1e-5;
  std::optional<double> momentum = 0.1;  // nullopt: cumulative moving average
  bool affine = true;
  bool track_running_stats = true;
  // Kiln's own: a ReLU on the output, fused into the batch-norm kernels (batch_norm_relu in
  // core/ops/batch_norm.h): BatchNorm3d{.relu = true} computes relu(bn(x)) with one kernel
  // fewer each way and no saved output. Not in PyTorch's options.
  bool relu = false;
};
using BatchNorm1dOptions = BatchNormOptions;
using BatchNorm2dOptions = BatchNormOptions;
using BatchNorm3dOptions = BatchNormOptions;

// The per-channel state of a norm layer, as PyTorch's _NormBase makes it and names it:
// weight (ones) and bias (zeros) when affine; running_mean (zeros), running_var (ones)
// and num_batches_tracked (an Int64 scalar) when tracking running statistics; each
// registered on `layer`, the others left undefined. BatchNormNd and InstanceNormNd
// (nn/normalization.h) both make theirs here.
struct NormState {
  Tensor weight, bias, running_mean, running_var, num_batches_tracked;
};
NormState register_norm_state(Module& layer, int64_t channels, bool affine, bool track_running_stats);

// How a batch norm's training statistics and backward sums become those of a batch
// spread over several processes (SyncBatchNorm, dist/sync_batch_norm.h); nn knows only
// this interface, dist implements it with a process group.
class BatchNormSync {
 public:
  virtual ~BatchNormSync() = default;
  // Whether there is anyone to synchronise with (false: a world of one).
  virtual bool active() const = 0;
  // Replaces this process's per-channel mean and biased variance over `count` values
  // by those of every process's batch; returns the total count.
  virtual int64_t combine(Tensor& mean, Tensor& var, int64_t count) = 0;
  // Replaces the backward's per-channel sums (of dy and dy * (x - mean)) by their sums
  // over the processes, in place.
  virtual void sum_gradients(const Tensor& sum_dy, const Tensor& sum_dy_xmu) = 0;
};

// The shared body of BatchNorm1d/2d/3d; `spatial_dims` = 1 for 1d means [N, C] or [N, C, L],
// and -1 any rank >= 2 (SyncBatchNorm).
class BatchNormNd : public Layer {
 public:
  Tensor forward(const Tensor& input) override;
  // relu(forward(input) + residual), fused (kiln::batch_norm_add_relu): the tail of a
  // residual block, with the same modes as forward (Note [Batch norm modes]) and
  // SyncBatchNorm's synchronisation. The layer must not have its own fused ReLU (relu =
  // false): that one would come before the add.
  Tensor forward_add_relu(const Tensor& input, const Tensor& residual);
  void reset_running_stats();
  void reset_parameters();
  std::string type_name() const override;
  std::string extra_repr() const override;
  const BatchNormOptions& options() const { return options_; }
  // With a BatchNormSync, training normalises with the statistics of the whole
  // distributed batch (and the layer prints as SyncBatchNorm); null: this process's.
  void set_sync(std::shared_ptr<BatchNormSync> sync) { sync_ = std::move(sync); }
  const std::shared_ptr<BatchNormSync>& sync() const { return sync_; }

  Tensor weight;               // [C] (affine)
  Tensor bias;                 // [C] (affine)
  Tensor running_mean;         // [C] (track_running_stats)
  Tensor running_var;          // [C] (track_running_stats)
  Tensor num_batches_tracked;  // Int64, 0-d (track_running_stats)

 protected:
  BatchNormNd(int64_t spatial_dims, const BatchNormOptions& options);

 private:
  void check_input(const Tensor& input) const;
  // forward's body; residual: undefined, or added before a fused ReLU.
  Tensor normalize(const Tensor& input, const Tensor& residual);
  // The op for one call: batch_norm, batch_norm_relu or batch_norm_add_relu.
  Tensor call_op(const Tensor& input, const Tensor& residual, const Tensor& mean, const Tensor& var,
                 bool training, double momentum) const;
  Tensor synchronized_forward(const Tensor& input, const Tensor& residual, const Tensor& mean,
                              const Tensor& var, double momentum);
  int64_t spatial_dims_;
  BatchNormOptions options_;
  std::shared_ptr<BatchNormSync> sync_;
};

class BatchNorm1d : public BatchNormNd {
 public:
  explicit BatchNorm1d(const BatchNorm1dOptions& options) : BatchNormNd(1, options) {}
};
class BatchNorm2d : public BatchNormNd {
 public:
  explicit BatchNorm2d(const BatchNorm2dOptions& options) : BatchNormNd(2, options) {}
};
class BatchNorm3d : public BatchNormNd {
 public:
  explicit BatchNorm3d(const BatchNorm3dOptions& options) : BatchNormNd(3, options) {}
};

}  // namespace kiln::nn
