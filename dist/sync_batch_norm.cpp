// ProcessGroupBatchNormSync and convert_sync_batchnorm (sync_batch_norm.h).
//
// Note [Merging statistics]: a rank's per-channel statistics are (n, mean, M2) with M2 =
// sum (x - mean)^2 = n * biased variance. Two sets merge exactly (Chan, Golub and LeVeque):
//   n = na + nb,  d = mean_b - mean_a,  mean = mean_a + d nb / n,  M2 = M2a + M2b + d^2 na nb / n
// with no subtraction of large sums (the naive sum x^2 / n - mean^2 loses every digit when
// the mean is large against the spread). All-reducing sums cannot do this, so the ranks
// all-gather their (n, mean, M2) rows, in float64, and each merges them in rank order.
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
  const Device device = mean.device();
  const TensorOptions f64{.dtype = DType::Float64, .device = device};
  const double n = static_cast<double>(count);
  const Tensor row =
      cat({full({1}, n, f64), mean.to(DType::Float64), var.to(DType::Float64).mul(scalar_tensor(n, f64))});
  Tensor rows = empty({g.size(), 2 * channels + 1}, f64);
  g.all_gather_into_tensor(rows, row)->wait();
  const Tensor all = rows.cpu();
  // Note [Merging statistics], in rank order.
  double total = 0;
  Tensor merged_mean = zeros({channels}, {.dtype = DType::Float64});
  Tensor merged_m2 = zeros({channels}, {.dtype = DType::Float64});
  for (int64_t r = 0; r < g.size(); ++r) {
    const Tensor rank_row = all.select(0, r);
    const double nb = rank_row.select(0, 0).item<double>();
    if (nb <= 0) continue;
    const Tensor mean_b = rank_row.narrow(0, 1, channels), m2_b = rank_row.narrow(0, 1 + channels, channels);
    const double na = total;
    total += nb;
    const Tensor delta = mean_b.sub(merged_mean);
    merged_mean = merged_mean.add(delta.mul(scalar_tensor(nb / total, {.dtype = DType::Float64})));
    merged_m2 = merged_m2.add(m2_b).add(
        delta.mul(delta).mul(scalar_tensor(na * nb / total, {.dtype = DType::Float64})));
  }
  const DType dtype = mean.dtype();
  mean = merged_mean.to(device, dtype);
  var = total > 0 ? merged_m2.div(scalar_tensor(total, {.dtype = DType::Float64})).to(device, dtype)
                  : zeros({channels}, {.dtype = dtype, .device = device});
  return static_cast<int64_t>(total);
}

void ProcessGroupBatchNormSync::sum_gradients(const Tensor& sum_dy, const Tensor& sum_dy_xmu) {
  NoGradGuard no_grad;
  const int64_t channels = sum_dy.numel();
  const Tensor both = cat({sum_dy, sum_dy_xmu});
  group().all_reduce(both, ReduceOp::Sum)->wait();
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
