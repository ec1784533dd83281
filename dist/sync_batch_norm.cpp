// ProcessGroupBatchNormSync and convert_sync_batchnorm (sync_batch_norm.h).
//
// Note [Merging statistics]: a rank's per-channel statistics are (n, mean, M2) with M2 =
// sum (x - mean)^2 = n * biased variance. Any number of sets merge exactly (the k-way form
// of Chan, Golub and LeVeque's pairwise update):
//   N = sum n_r,   mean = sum n_r mean_r / N,   M2 = sum M2_r + sum n_r (mean_r - mean)^2
// with no subtraction of large sums (the naive sum x^2 / N - mean^2 loses every digit when
// the mean is large against the spread). All-reducing sums cannot do this, so the ranks
// all-gather their (n, mean, M2) rows, in float64, and each computes the merge on the
// device, in one pass over the same rows, hence the same bits on every rank. The counts
// come to the host once (N is an integer to the normalisation and the running variance's
// N / (N - 1)): the one host sync of a synchronised forward.
#include "dist/sync_batch_norm.h"

#include "core/autograd/grad_mode.h"
#include "core/error.h"
#include "core/ops/factory.h"
#include "core/ops/shape.h"
#include "dist/init_process_group.h"

namespace kiln::dist {

ProcessGroup& ProcessGroupBatchNormSync::group() const {
  if (!group_) group_ = world_group();
  return *group_;
}

bool ProcessGroupBatchNormSync::active() const {
  if (!group_ && !is_initialized()) return false;
  return group().size() > 1;
}

int64_t ProcessGroupBatchNormSync::combine(Tensor& mean, Tensor& var, int64_t count) {
  NoGradGuard no_grad;
  ProcessGroup& g = group();
  const int64_t channels = mean.numel();
  const TensorOptions f64{.dtype = DType::Float64, .device = mean.device()};
  const Tensor n = full({1}, static_cast<double>(count), f64);
  const Tensor row = cat({n, mean.to(DType::Float64), var.to(DType::Float64).mul(n)});
  Tensor rows = empty({g.size(), 2 * channels + 1}, f64);
  g.all_gather_into_tensor(rows, row)->wait_stream();
  // Note [Merging statistics]: [W, 1] counts, [W, C] means and M2s.
  const Tensor counts = rows.narrow(1, 0, 1), means = rows.narrow(1, 1, channels);
  const Tensor m2s = rows.narrow(1, 1 + channels, channels);
  double total = 0;
  for (const double c : counts.to_vector<double>()) total += c;
  const DType dtype = mean.dtype();
  if (total <= 0) {
    mean = zeros({channels}, {.dtype = dtype, .device = mean.device()});
    var = mean.clone();
    return 0;
  }
  const Tensor n_total = scalar_tensor(total, f64);
  const Tensor merged_mean = counts.mul(means).sum({0}).div(n_total);
  const Tensor deviation = means.sub(merged_mean);
  const Tensor merged_m2 = m2s.sum({0}).add(counts.mul(deviation).mul(deviation).sum({0}));
  mean = merged_mean.to(dtype);
  var = merged_m2.div(n_total).to(dtype);
  return static_cast<int64_t>(total);
}

void ProcessGroupBatchNormSync::sum_gradients(const Tensor& sum_dy, const Tensor& sum_dy_xmu) {
  NoGradGuard no_grad;
  const int64_t channels = sum_dy.numel();
  const Tensor both = cat({sum_dy, sum_dy_xmu});
  group()
      .all_reduce(both, ReduceOp::Sum)
      ->wait_stream();  // the backward kernel reads it next, on this stream
  Tensor dy = sum_dy, dy_xmu = sum_dy_xmu;
  dy.copy_(both.narrow(0, 0, channels));
  dy_xmu.copy_(both.narrow(0, channels, channels));
}

SyncBatchNorm::SyncBatchNorm(const nn::BatchNormOptions& options, std::shared_ptr<ProcessGroup> group)
    : BatchNormNd(-1, options) {
  set_sync(std::make_shared<ProcessGroupBatchNormSync>(std::move(group)));
}

int64_t convert_sync_batchnorm(nn::Module& model, std::shared_ptr<ProcessGroup> group) {
  const auto sync = std::make_shared<ProcessGroupBatchNormSync>(std::move(group));
  int64_t converted = 0;
  model.apply([&](nn::Module& module) {
    if (auto* bn = dynamic_cast<nn::BatchNormNd*>(&module)) {
      bn->set_sync(sync);
      ++converted;
    }
  });
  return converted;
}

}  // namespace kiln::dist
