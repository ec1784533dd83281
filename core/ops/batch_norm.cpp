// batch_norm (batch_norm.h) and the pieces it is built from (batch_norm_pieces.h): argument
// checks, statistics, the running-statistics update, and the normalisation with its
// backward node, each a call into the backend's batch-norm kernels (Note [Batch norm
// pieces] in core/backend.h).
#include "core/ops/batch_norm.h"

#include <cmath>

#include "core/autograd/grad_mode.h"
#include "core/autograd/node.h"
#include "core/backend.h"
#include "core/ops/batch_norm_pieces.h"
#include "core/ops/elementwise.h"
#include "core/ops/factory.h"
#include "core/pooled.h"

namespace kiln {
namespace batch_norm_pieces {
namespace {

using autograd::Node;
using autograd::SavedTensor;

void check_per_channel(const char* op, const char* name, const Tensor& t, const Tensor& input) {
  if (!t.defined()) return;
  const int64_t channels = input.sizes()[1];
  KILN_CHECK(t.is_floating_point(), op, ": ", name, " must be floating point, got ", t.dtype());
  KILN_CHECK(t.dim() == 1 && t.numel() == channels, op, ": ", name, " must have shape [", channels,
             "] (one value per channel of input ", input.sizes(), "), got ", t.sizes());
  KILN_CHECK(t.device() == input.device(), op, ": ", name, " is on ", t.device(), " but input is on ",
             input.device());
}

// A per-channel tensor as the kernels take it: contiguous, in the statistics dtype, with
// no history (the node takes care of the gradient). Undefined stays undefined.
Tensor kernel_per_channel(const Tensor& t, DType dtype) {
  if (!t.defined()) return t;
  NoGradGuard no_grad;
  return t.detach().to(dtype).contiguous();
}

// The gradient of batch_norm_normalize. Saves the input (in kernel layout), the
// per-channel mean and invstd it normalised with, and the weight in the statistics dtype
// (undefined: 1); with the fused ReLU also the bias (Note [Batch norm with ReLU]: the
// kernels recompute y), with the fused add the output instead (Note [Batch norm, add and
// ReLU]: its sign is the mask; the gradient at y is also the residual's).
struct BatchNormBackward final : Node {
  SavedTensor input, mean, invstd, weight, bias, output;
  int64_t count = 1;
  bool training = true;
  bool relu = false;
  bool add = false;
  GradSumsHook grad_sums_hook;
  DType weight_dtype = DType::Float32, bias_dtype = DType::Float32;
  std::string op;  // the public op's name: SyncBatchNorm passes its type name, not a literal

  std::vector<Tensor> apply(std::vector<Tensor>&& g) override {
    const Tensor x = input.unpack(*this), m = mean.unpack(*this), s = invstd.unpack(*this);
    // With the fused add the ReLU's mask is applied once, by backward_reduce into
    // grad_residual, which backward_input then reads unmasked.
    const BatchNormCoefficients norm{.mean = m,
                                     .invstd = s,
                                     .weight = weight.defined() ? weight.unpack(*this) : Tensor(),
                                     .bias = bias.defined() ? bias.unpack(*this) : Tensor(),
                                     .relu = relu && !add};
    // dy in x's layout (a channels-last x gets a channels-last dy from a channels-last
    // network: no copy; to() keeps the layout, so a dtype change is one copy too).
    Tensor dy = g[0].to(x.dtype()).contiguous(x.suggest_memory_format());
    const TensorOptions per_channel{.dtype = m.dtype(), .device = m.device()};
    const int64_t channels = x.sizes()[1];
    Backend& kernels = backend(x.device());
    const bool need_input = needs_input_grad(0), need_weight = needs_input_grad(1), need_bias = needs_input_grad(2);
    Tensor sum_dy, sum_dy_xmu, grad_residual;
    if (add || need_weight || need_bias || (need_input && training)) {
      sum_dy = empty({channels}, per_channel);
      sum_dy_xmu = empty({channels}, per_channel);
      if (add) {
        BatchNormCoefficients masked = norm;
        masked.relu = true;
        masked.output = output.unpack(*this);
        grad_residual = empty_like(x);
        kernels.batch_norm_backward_reduce(dy, x, masked, sum_dy, sum_dy_xmu, grad_residual);
        dy = grad_residual;  // the gradient at y
      } else {
        kernels.batch_norm_backward_reduce(dy, x, norm, sum_dy, sum_dy_xmu, Tensor());
      }
    }
    // The local sums, before a SyncBatchNorm hook replaces them by their sum over ranks:
    // each rank's parameter gradient is its own (DDP averages those).
    Tensor grad_weight, grad_bias, grad_input;
    if (need_weight) grad_weight = mul(sum_dy_xmu, s).to(weight_dtype);
    if (need_bias) grad_bias = sum_dy.to(x.device(), bias_dtype, /*non_blocking=*/false, /*copy=*/true);
    if (need_input) {
      if (training) {
        if (grad_sums_hook) grad_sums_hook(sum_dy, sum_dy_xmu);
      } else {  // the statistics are constants: dx = dy invstd weight
        sum_dy = zeros({channels}, per_channel);
        sum_dy_xmu = sum_dy;
      }
      grad_input = empty_like(x);
      kernels.batch_norm_backward_input(dy, x, norm, sum_dy, sum_dy_xmu, count, grad_input);
    }
    if (add && needs_input_grad(3)) return {grad_input, grad_weight, grad_bias, grad_residual};
    return {grad_input, grad_weight, grad_bias};
  }
  void release_saved() override {
    input.release();
    mean.release();
    invstd.release();
    weight.release();
    bias.release();
    output.release();
  }
  std::string name() const override { return op; }
};

}  // namespace

Tensor kernel_layout(const Tensor& input) { return input.contiguous(input.suggest_memory_format()); }

bool is_kernel_layout(const Tensor& input) {
  return input.is_contiguous() || is_channels_last_only(input.sizes(), input.strides());
}

DType stats_dtype(DType input) { return input == DType::Float64 ? DType::Float64 : DType::Float32; }

void check_arguments(const char* op, const Tensor& input, const Tensor& running_mean, const Tensor& running_var,
                     const Tensor& weight, const Tensor& bias, bool training) {
  KILN_CHECK(input.defined(), op, ": undefined input");
  KILN_CHECK(input.dim() >= 2, op, ": expected input of shape [N, C, *] (rank >= 2), got ", input.sizes(),
             ". Hint: a single sample needs a batch dim, e.g. x.unsqueeze(0)");
  KILN_CHECK(input.is_floating_point(), op, ": expected a floating-point input, got ", input.dtype());
  check_per_channel(op, "running_mean", running_mean, input);
  check_per_channel(op, "running_var", running_var, input);
  check_per_channel(op, "weight", weight, input);
  check_per_channel(op, "bias", bias, input);
  KILN_CHECK(running_mean.defined() == running_var.defined(), op,
             ": running_mean and running_var must be both defined or both undefined, got ",
             running_mean.defined() ? "running_mean" : "running_var", " alone");
  KILN_CHECK(training || running_mean.defined(), op,
             ": running_mean and running_var must be defined in evaluation mode (training = false)");
  KILN_CHECK(!training || count_per_channel(input) > 1, op,
             ": Expected more than 1 value per channel when training, got input size ", input.sizes());
}

Tensor residual_operand(const char* op, const Tensor& residual, const Tensor& x) {
  KILN_CHECK(residual.defined(), op, ": undefined residual");
  KILN_CHECK(residual.sizes() == x.sizes(), op, ": the residual must have the input's shape ", x.sizes(),
             ", got ", residual.sizes());
  KILN_CHECK(residual.dtype() == x.dtype(), op, ": the residual must have the input's dtype ", x.dtype(),
             ", got ", residual.dtype(), ". Hint: cast the residual with .to(dtype) first");
  KILN_CHECK(residual.device() == x.device(), op, ": the residual is on ", residual.device(),
             " but the input is on ", x.device());
  // The kernels take every big operand in one channel order (x's: row-major when ambiguous).
  return residual.contiguous(x.is_contiguous() ? MemoryFormat::Contiguous : channels_last_format(x.dim()));
}

int64_t count_per_channel(const Tensor& input) {
  int64_t count = input.sizes()[0];
  for (int64_t d = 2; d < input.dim(); ++d) count *= input.sizes()[d];
  return count;
}

Stats local_stats(const Tensor& input) {
  KILN_ASSERT(is_kernel_layout(input), "batch_norm stats: input must be contiguous or channels-last");
  const TensorOptions options{.dtype = stats_dtype(input.dtype()), .device = input.device()};
  Stats stats{empty({input.sizes()[1]}, options), empty({input.sizes()[1]}, options)};
  NoGradGuard no_grad;
  backend(input.device()).batch_norm_stats(input, stats.mean, stats.var);
  return stats;
}

Tensor invstd_of(const Tensor& var, double eps) {
  NoGradGuard no_grad;
  return rsqrt(add(var, eps)).contiguous();
}

void update_running_stats(const Tensor& running_mean, const Tensor& running_var, const Stats& batch, int64_t count,
                          double momentum) {
  if (!running_mean.defined()) return;
  NoGradGuard no_grad;
  const double unbias = static_cast<double>(count) / static_cast<double>(count - 1);
  Tensor mean = running_mean, var = running_var;  // handles: the ops below write the callers' tensors
  mean.mul_(1.0 - momentum).add_(batch.mean.to(mean.dtype()), momentum);
  var.mul_(1.0 - momentum).add_(mul(batch.var, unbias).to(var.dtype()), momentum);
}

Tensor batch_norm_normalize(const char* op, const Tensor& input, const Tensor& weight, const Tensor& bias,
                            const Normalization& norm) {
  KILN_ASSERT(is_kernel_layout(input) && norm.mean.is_contiguous() && norm.invstd.is_contiguous(), op,
              ": normalize expects a contiguous or channels-last input and contiguous statistics");
  const DType dtype = stats_dtype(input.dtype());
  const Tensor w = kernel_per_channel(weight, dtype), b = kernel_per_channel(bias, dtype);
  const bool add = norm.residual.defined();
  KILN_ASSERT(!add || norm.relu, op, ": the residual is added only before the fused ReLU");
  Tensor out = empty_like(input);  // laid out as the input
  {
    NoGradGuard no_grad;
    const BatchNormCoefficients coefficients{.mean = norm.mean,
                                             .invstd = norm.invstd,
                                             .weight = w,
                                             .bias = b,
                                             .relu = norm.relu,
                                             .residual = norm.residual};
    backend(input.device()).batch_norm_apply(input, coefficients, out);
  }
  if (autograd::any_requires_grad({&input, &weight, &bias, &norm.residual})) {
    auto node = make_pooled<BatchNormBackward>();
    node->input = SavedTensor(input);
    node->mean = SavedTensor(norm.mean);
    node->invstd = SavedTensor(norm.invstd);
    if (w.defined()) node->weight = SavedTensor(w);
    if (norm.relu && !add && b.defined()) node->bias = SavedTensor(b);
    if (add) node->output = SavedTensor(out);
    node->relu = norm.relu;
    node->add = add;
    node->count = norm.count;
    node->training = norm.training;
    node->grad_sums_hook = norm.grad_sums_hook;
    if (weight.defined()) node->weight_dtype = weight.dtype();
    if (bias.defined()) node->bias_dtype = bias.dtype();
    node->op = op;
    if (add) {
      autograd::record(node, {input, weight, bias, norm.residual}, {out});
    } else {
      autograd::record(node, {input, weight, bias}, {out});
    }
  }
  return out;
}

}  // namespace batch_norm_pieces

namespace {

// residual: undefined, or added before the ReLU (relu on).
Tensor batch_norm_impl(const char* op, const Tensor& input, const Tensor& running_mean,
                       const Tensor& running_var, const Tensor& weight, const Tensor& bias, bool training,
                       double momentum, double eps, bool relu, const Tensor& residual = Tensor()) {
  namespace bn = batch_norm_pieces;
  bn::check_arguments(op, input, running_mean, running_var, weight, bias, training);
  KILN_CHECK(eps >= 0 && std::isfinite(eps), op, ": eps must be a finite value >= 0, got ", eps);
  const Tensor x = bn::kernel_layout(input);
  const int64_t count = bn::count_per_channel(x);
  bn::Normalization norm{.count = count, .training = training, .relu = relu};
  if (residual.defined()) norm.residual = bn::residual_operand(op, residual, x);
  if (training) {
    const bn::Stats batch = bn::local_stats(x);
    bn::update_running_stats(running_mean, running_var, batch, count, momentum);
    norm.mean = batch.mean;
    norm.invstd = bn::invstd_of(batch.var, eps);
  } else {  // copies: the node saves them, and the running statistics change in place
    NoGradGuard no_grad;
    const DType dtype = bn::stats_dtype(x.dtype());
    norm.mean = running_mean.to(x.device(), dtype, /*non_blocking=*/false, /*copy=*/true).contiguous();
    norm.invstd = bn::invstd_of(running_var.to(dtype), eps);
  }
  return bn::batch_norm_normalize(op, x, weight, bias, norm);
}

}  // namespace

Tensor batch_norm(const Tensor& input, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                  const Tensor& bias, bool training, double momentum, double eps) {
  return batch_norm_impl("batch_norm", input, running_mean, running_var, weight, bias, training, momentum, eps,
                         /*relu=*/false);
}

Tensor batch_norm_relu(const Tensor& input, const Tensor& running_mean, const Tensor& running_var,
                       const Tensor& weight, const Tensor& bias, bool training, double momentum, double eps) {
  return batch_norm_impl("batch_norm_relu", input, running_mean, running_var, weight, bias, training, momentum, eps,
                         /*relu=*/true);
}

Tensor batch_norm_add_relu(const Tensor& input, const Tensor& residual, const Tensor& running_mean,
                           const Tensor& running_var, const Tensor& weight, const Tensor& bias, bool training,
                           double momentum, double eps) {
  KILN_CHECK(residual.defined(), "batch_norm_add_relu: undefined residual");
  return batch_norm_impl("batch_norm_add_relu", input, running_mean, running_var, weight, bias, training,
                         momentum, eps, /*relu=*/true, residual);
}

}  // namespace kiln
