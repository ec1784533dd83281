// layer_norm, group_norm and instance_norm (normalization.h): var_mean over the group's
// dims (keepdim), (x - mean) * rsqrt(var + eps), then weight and bias broadcast along the
// channel (or trailing) dims. instance_norm uses batch_norm for its running statistics:
// the input seen as [1, N*C, *], each instance a channel, the running statistics repeated
// N times and averaged back afterwards (PyTorch's own implementation).
#include "core/ops/normalization.h"

#include <cmath>
#include <functional>

#include "core/autograd/grad_mode.h"
#include "core/error.h"
#include "core/ops/batch_norm.h"
#include "core/ops/elementwise.h"
#include "core/ops/reduce.h"
#include "core/ops/shape.h"
#include "core/ops/view.h"

namespace kiln {
namespace {

void check_eps(double eps, const char* op) {
  KILN_CHECK(std::isfinite(eps) && eps >= 0, op, ": eps must be finite and >= 0, got ", eps);
}

// (x - mean) * rsqrt(var + eps) over `dims` (biased variance).
Tensor normalise(const Tensor& x, const std::vector<int64_t>& dims, double eps) {
  const auto [var, mean] = var_mean(x, dims, /*correction=*/0, /*keepdim=*/true);
  return mul(sub(x, mean), rsqrt(add(var, eps)));
}

// A [C] parameter shaped to broadcast along dim 1 of a rank-`rank` input.
Tensor per_channel(const Tensor& p, int64_t rank) {
  std::vector<int64_t> sizes(static_cast<size_t>(rank), 1);
  sizes[1] = p.numel();
  return p.reshape(sizes);
}

Tensor affine(Tensor y, const Tensor& weight, const Tensor& bias,
              const std::function<Tensor(const Tensor&)>& shape) {
  if (weight.defined()) y = mul(y, shape(weight));
  if (bias.defined()) y = add(y, shape(bias));
  return y;
}

void check_channel_param(const Tensor& p, int64_t channels, const char* op, const char* what) {
  KILN_CHECK(!p.defined() || (p.dim() == 1 && p.size(0) == channels), op, ": ", what, " must be [", channels,
             "], got ", p.defined() ? p.sizes() : Dims{});
}

}  // namespace

Tensor layer_norm(const Tensor& input, const std::vector<int64_t>& normalized_shape, const Tensor& weight,
                  const Tensor& bias, double eps) {
  check_eps(eps, "layer_norm");
  const auto k = static_cast<int64_t>(normalized_shape.size());
  KILN_CHECK(k >= 1 && k <= input.dim(), "layer_norm: normalized_shape ", normalized_shape,
             " for an input of ", input.sizes());
  const std::vector<int64_t> tail(input.sizes().end() - k, input.sizes().end());
  KILN_CHECK(tail == normalized_shape, "layer_norm: the input's trailing dims ", tail,
             " are not normalized_shape ", normalized_shape);
  for (const Tensor& p : {weight, bias}) {
    KILN_CHECK(!p.defined() || p.sizes() == normalized_shape, "layer_norm: weight and bias must be ",
               normalized_shape, ", got ", p.sizes());
  }
  std::vector<int64_t> dims;
  for (int64_t d = input.dim() - k; d < input.dim(); ++d) dims.push_back(d);
  return affine(normalise(input, dims, eps), weight, bias, [](const Tensor& p) { return p; });
}

Tensor group_norm(const Tensor& input, int64_t num_groups, const Tensor& weight, const Tensor& bias,
                  double eps) {
  check_eps(eps, "group_norm");
  KILN_CHECK(input.dim() >= 2, "group_norm: input must be [N, C, *], got ", input.sizes());
  const int64_t n = input.size(0), c = input.size(1);
  KILN_CHECK(num_groups >= 1 && c % num_groups == 0, "group_norm: ", c, " channels do not split into ",
             num_groups, " groups");
  check_channel_param(weight, c, "group_norm", "weight");
  check_channel_param(bias, c, "group_norm", "bias");
  const Tensor grouped = input.reshape({n, num_groups, -1});
  const Tensor y = normalise(grouped, {2}, eps).reshape(input.sizes());
  return affine(y, weight, bias, [&](const Tensor& p) { return per_channel(p, input.dim()); });
}

Tensor instance_norm(const Tensor& input, const Tensor& running_mean, const Tensor& running_var,
                     const Tensor& weight, const Tensor& bias, bool use_input_stats, double momentum,
                     double eps) {
  check_eps(eps, "instance_norm");
  KILN_CHECK(input.dim() >= 3, "instance_norm: input must be [N, C, spatial...], got ", input.sizes());
  const int64_t n = input.size(0), c = input.size(1);
  check_channel_param(weight, c, "instance_norm", "weight");
  check_channel_param(bias, c, "instance_norm", "bias");
  check_channel_param(running_mean, c, "instance_norm", "running_mean");
  check_channel_param(running_var, c, "instance_norm", "running_var");
  KILN_CHECK(running_mean.defined() == running_var.defined(),
             "instance_norm: give both running statistics or none");
  KILN_CHECK(use_input_stats || running_mean.defined(),
             "instance_norm: without input statistics it needs the running statistics");
  const auto shape = [&](const Tensor& p) { return per_channel(p, input.dim()); };
  if (!running_mean.defined()) {
    std::vector<int64_t> dims;
    for (int64_t d = 2; d < input.dim(); ++d) dims.push_back(d);
    return affine(normalise(input, dims, eps), weight, bias, shape);
  }
  // Each instance a channel of batch_norm, the running statistics repeated per sample.
  std::vector<int64_t> as_channels = input.sizes();
  as_channels[0] = 1;
  as_channels[1] = n * c;
  Tensor mean_rep, var_rep;
  {
    NoGradGuard no_grad;
    mean_rep = running_mean.unsqueeze(0).expand({n, c}).clone().reshape({n * c});
    var_rep = running_var.unsqueeze(0).expand({n, c}).clone().reshape({n * c});
  }
  const Tensor y =
      batch_norm(input.reshape(as_channels), mean_rep, var_rep, {}, {}, use_input_stats, momentum, eps)
          .reshape(input.sizes());
  if (use_input_stats) {
    NoGradGuard no_grad;
    Tensor mean = running_mean, var = running_var;  // handles to the caller's statistics
    mean.copy_(mean_rep.reshape({n, c}).mean({0}));
    var.copy_(var_rep.reshape({n, c}).mean({0}));
  }
  return affine(y, weight, bias, shape);
}

}  // namespace kiln
