// SyncBatchNorm: batch norm whose training statistics are those of the whole batch, over
// every rank of a process group, as torch.nn.SyncBatchNorm. With small per-GPU batches
// (3D volumes leave room for 2 or 4 per GPU) the per-rank statistics are too noisy to
// train with; synchronised, N ranks of B samples normalise like one process with N*B.
//
// A BatchNormNd does the work (nn/batchnorm.h) once it has a BatchNormSync; this file's
// ProcessGroupBatchNormSync is that sync over a ProcessGroup:
// - forward: every rank's (count, mean, M2 = count * biased variance) per channel is
//   all-gathered and merged on the device with the k-way form of Chan's formulas (Note
//   [Merging statistics]), so uneven batch sizes (even an empty one) are exact and every
//   rank gets the same bits; the running statistics use the total count.
// - backward: the per-channel sums of dy and dy * (x - mean) are all-reduced between the
//   two backward kernels; the weight and bias gradients stay each rank's own (DDP
//   averages them).
// - eval normalises with the running statistics, with no communication; a group of one
//   (or no initialised group) is plain batch norm.
//
// convert_sync_batchnorm(model) turns every BatchNorm of a model into a SyncBatchNorm in
// place: same objects, names, parameters and buffers, so the model's own pointers to its
// layers, its state dict and an optimizer built on it all stay valid.
//
//   convert_sync_batchnorm(*model);                  // before DDP wraps it
//   DistributedDataParallel ddp(model);
#pragma once

#include <memory>

#include "dist/process_group.h"
#include "nn/batchnorm.h"

namespace kiln::dist {

class ProcessGroupBatchNormSync : public nn::BatchNormSync {
 public:
  // group null: the default group, looked up at the first forward (none: inactive).
  explicit ProcessGroupBatchNormSync(std::shared_ptr<ProcessGroup> group = nullptr)
      : group_(std::move(group)) {}
  bool active() const override;
  int64_t combine(Tensor& mean, Tensor& var, int64_t count) override;
  void sum_gradients(const Tensor& sum_dy, const Tensor& sum_dy_xmu) override;

 private:
  ProcessGroup& group() const;
  mutable std::shared_ptr<ProcessGroup> group_;
};

// A batch norm over inputs of any rank >= 2, synchronised over `group` (PyTorch's
// SyncBatchNorm(num_features, eps, momentum, affine, track_running_stats, process_group)).
class SyncBatchNorm : public nn::BatchNormNd {
 public:
  explicit SyncBatchNorm(const nn::BatchNormOptions& options, std::shared_ptr<ProcessGroup> group = nullptr);
};

// Every BatchNormNd in `model` (itself included) synchronised over `group` (null: the
// default group); returns how many.
int64_t convert_sync_batchnorm(nn::Module& model, std::shared_ptr<ProcessGroup> group = nullptr);

}  // namespace kiln::dist
