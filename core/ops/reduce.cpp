// Reductions: argument checks, the result's shape and dtype, the backend call, and each
// op's backward right under it (see reduce.h).
//
// Every op starts from plan_reduction (which dims, which shapes) and ends in the backend's
// one reduction engine (Backend::reduce / var_mean / arg_reduce). The kernel writes into
// the result viewed in keepdim form (size 1 in each reduced dim), so keepdim=false costs
// nothing. Backward formulas reshape the incoming gradient to that keepdim form too, where
// it broadcasts against the input.
//
// sum, mean, var, std, var_mean, norm and logsumexp are autocast's float32 ops (core/
// autocast.h): under autocast a float16/bfloat16 input is cast to float32 first, so long
// sums do not lose precision or overflow. max/min/argmax are exact in any dtype and stay.
#include "core/ops/reduce.h"

#include <algorithm>
#include <cmath>

#include "core/autocast.h"
#include "core/autograd/grad_mode.h"
#include "core/autograd/node.h"
#include "core/backend.h"
#include "core/checked_math.h"
#include "core/ops/elementwise.h"
#include "core/ops/factory.h"
#include "core/ops/view.h"
#include "core/pooled.h"

namespace kiln {
namespace {

using autograd::Node;
using autograd::SavedTensor;

// ---- shared plumbing ----------------------------------------------------------------------

// Which dims one reduction reduces, and the shapes of its result.
struct ReductionPlan {
  Dims dims;        // wrapped, sorted, unique; empty only for a 0-d input
  Dims keep_shape;  // the input's shape with each reduced dim set to 1
  Dims out_shape;   // keep_shape, or without the reduced dims
  int64_t count = 1;                // elements reduced into each output
};

// `dims` empty means every dim; negative dims wrap; a dim named twice is an error.
ReductionPlan plan_reduction(const Tensor& x, const Dims& dims, bool keepdim, const char* op) {
  KILN_CHECK(x.defined(), op, ": undefined tensor");
  const int64_t ndim = x.dim();
  // reduced[d] != 0: dim d is reduced (a flag per dim, in place up to Dims::kInline dims).
  Dims reduced(static_cast<size_t>(std::max<int64_t>(ndim, 1)), dims.empty() ? 1 : 0);
  for (const int64_t dim : dims) {
    const int64_t d = wrap_dim(dim, ndim, op);
    KILN_CHECK(reduced[d] == 0, op, ": dim ", d, " appears more than once in dims ", dims);
    reduced[d] = 1;
  }
  ReductionPlan plan;  // a 0-d tensor reduces nothing: dim 0 or -1 of it is the tensor itself
  plan.keep_shape.resize(static_cast<size_t>(ndim));
  for (int64_t d = 0; d < ndim; ++d) {
    const int64_t size = x.sizes()[d];
    if (reduced[d] != 0) {
      plan.dims.push_back(d);
      plan.keep_shape[d] = 1;
      // Saturates only for an empty input, whose reduced dims' product may not fit int64
      // beside a zero-size kept dim ([2^32, 0, 2^32] over {0, 2}); its output is empty.
      plan.count = checked_mul(plan.count, size).value_or(INT64_MAX);
    } else {
      plan.keep_shape[d] = size;
      if (!keepdim) plan.out_shape.push_back(size);
    }
  }
  if (keepdim) plan.out_shape = plan.keep_shape;
  return plan;
}

void require_floating(const Tensor& x, const char* op) {
  KILN_CHECK(x.is_floating_point(), op, ": expected a floating-point input, got ", x.dtype(),
             ". Hint: convert it first, e.g. x.to(DType::Float32)");
}

// max, min, argmax ... have no identity: reducing a size-0 dim is an error (as PyTorch).
void require_nonempty(const Tensor& x, const ReductionPlan& plan, const char* op, const char* what) {
  if (plan.count > 0) return;
  for (int64_t d : plan.dims) {
    KILN_CHECK(x.sizes()[d] != 0, op, ": cannot reduce over dim ", d, " of size 0 (input shape ", x.sizes(),
               "): an empty reduction has no ", what, ". Hint: reduce only over dims of non-zero size");
  }
}

// A new result of `dtype`, filled by Backend::reduce through its keepdim view.
Tensor reduce_kernel(ReduceOp op, const Tensor& x, const ReductionPlan& plan, DType dtype,
                     const ReduceParams& params = {}) {
  Tensor out = empty(plan.out_shape, {.dtype = dtype, .device = x.device()});
  if (out.numel() > 0) {
    NoGradGuard no_grad;
    backend(x.device()).reduce(op, x, plan.dims, contiguous_alias(out, plan.keep_shape), params);
  }
  return out;
}

// Elements of x equal to its (keepdim-form) extremum `target`, as 1/0 in x's dtype.
Tensor extremum_mask(const Tensor& x, const Tensor& target) { return eq(x, target).to(x.dtype()); }

// ---- sum, mean: d sum / dx = g broadcast back; d mean / dx = g / count --------------------

struct SumBackward final : Node {
  Dims input_sizes, keep_shape;
  double divisor = 1.0;  // mean: the count
  const char* op = "";  // a string literal: the public op's name
  std::vector<Tensor> apply(std::vector<Tensor>&& g) override {
    Tensor grad = g[0].reshape(keep_shape);
    if (divisor != 1.0) grad = div(grad, divisor);
    return {expand(grad, input_sizes)};
  }
  std::string name() const override { return op; }
};

Tensor sum_or_mean(const Tensor& x, const Dims& dims, bool keepdim, bool is_mean) {
  const char* op = is_mean ? "mean" : "sum";
  const ReductionPlan plan = plan_reduction(x, dims, keepdim, op);
  if (is_mean) require_floating(x, op);
  // Integers and bool sum into int64 (as PyTorch), so a sum of uint8 does not wrap.
  const DType dtype = x.is_floating_point() ? x.dtype() : DType::Int64;
  Tensor out = reduce_kernel(is_mean ? ReduceOp::Mean : ReduceOp::Sum, x, plan, dtype);
  if (autograd::any_requires_grad({&x})) {
    auto node = make_pooled<SumBackward>();
    node->input_sizes = x.sizes();
    node->keep_shape = plan.keep_shape;
    if (is_mean) node->divisor = static_cast<double>(plan.count);
    node->op = op;
    autograd::record(node, {x}, {out});
  }
  return out;
}

// ---- amax, amin, max(x), min(x) -----------------------------------------------------------
// g is split evenly among the elements equal to the extremum: a tie of k elements gives
// each g / k (PyTorch's amax rule). Saves the input and the result.

struct ExtremumBackward final : Node {
  SavedTensor x, out;
  Dims keep_shape, dims;
  const char* op = "";  // a string literal: the public op's name
  std::vector<Tensor> apply(std::vector<Tensor>&& g) override {
    const Tensor xv = x.unpack(*this);
    const Tensor mask = extremum_mask(xv, out.unpack(*this).reshape(keep_shape));
    const Tensor ties = sum(mask, dims, /*keepdim=*/true);
    return {mul(mask, div(g[0].reshape(keep_shape), ties))};
  }
  void release_saved() override {
    x.release();
    out.release();
  }
  std::string name() const override { return op; }
};

Tensor extremum(const Tensor& x, const Dims& dims, bool keepdim, bool is_max, const char* op) {
  const ReductionPlan plan = plan_reduction(x, dims, keepdim, op);
  require_nonempty(x, plan, op, is_max ? "maximum" : "minimum");
  Tensor out = reduce_kernel(is_max ? ReduceOp::Max : ReduceOp::Min, x, plan, x.dtype());
  if (autograd::any_requires_grad({&x})) {
    auto node = make_pooled<ExtremumBackward>();
    node->x = SavedTensor(x);
    node->out = SavedTensor(out);
    node->keep_shape = plan.keep_shape;
    node->dims = plan.dims;
    node->op = op;
    autograd::record(node, {x}, {out});
  }
  return out;
}

// ---- max(x, dim), min(x, dim), argmax, argmin ---------------------------------------------
// The gradient of the values goes to the returned index alone: g where
// arange(n) == index along dim, else 0 (a one-hot built from elementwise ops, no scatter).
// Saves the indices.

struct ValueSelectionBackward final : Node {
  SavedTensor indices;  // keepdim form
  Dims input_sizes;
  int64_t dim = 0;
  const char* op = "";  // a string literal: the public op's name
  std::vector<Tensor> apply(std::vector<Tensor>&& g) override {
    const Tensor index = indices.unpack(*this);
    Dims line(input_sizes.size(), 1);
    line[dim] = input_sizes[dim];
    const Tensor positions = arange(input_sizes[dim], {.dtype = DType::Int64, .device = index.device()}).view(line);
    return {where(eq(positions, index), g[0].reshape(index.sizes()), 0.0)};
  }
  void release_saved() override { indices.release(); }
  std::string name() const override { return op; }
};

// (values, indices) of the first extremum along dim; records the values' gradient when
// `differentiable`.
std::tuple<Tensor, Tensor> select_extremum(const Tensor& x, int64_t dim, bool keepdim, bool is_max,
                                           bool differentiable, const char* op) {
  KILN_CHECK(x.defined(), op, ": undefined tensor");
  if (x.dim() == 0) {
    wrap_dim(dim, 0, op);  // only 0 and -1 are valid
    return select_extremum(x.reshape({1}), 0, /*keepdim=*/false, is_max, differentiable, op);
  }
  const int64_t d = wrap_dim(dim, x.dim(), op);
  const ReductionPlan plan = plan_reduction(x, {d}, keepdim, op);
  require_nonempty(x, plan, op, is_max ? "maximum" : "minimum");
  Tensor values = empty(plan.out_shape, {.dtype = x.dtype(), .device = x.device()});
  Tensor indices = empty(plan.out_shape, {.dtype = DType::Int64, .device = x.device()});
  if (values.numel() > 0) {
    NoGradGuard no_grad;
    backend(x.device()).arg_reduce(is_max ? ArgReduceOp::ArgMax : ArgReduceOp::ArgMin, x, d,
                                   values.view(plan.keep_shape), indices.view(plan.keep_shape));
  }
  if (differentiable && autograd::any_requires_grad({&x})) {
    auto node = make_pooled<ValueSelectionBackward>();
    node->indices = SavedTensor(indices.view(plan.keep_shape));
    node->input_sizes = x.sizes();
    node->dim = d;
    node->op = op;
    autograd::record(node, {x}, {values});
  }
  return {values, indices};
}

Tensor arg_extremum(const Tensor& x, std::optional<int64_t> dim, bool keepdim, bool is_max) {
  const char* op = is_max ? "argmax" : "argmin";
  KILN_CHECK(x.defined(), op, ": undefined tensor");
  if (dim) return std::get<1>(select_extremum(x, *dim, keepdim, is_max, /*differentiable=*/false, op));
  // No dim: the index into the flattened tensor.
  KILN_CHECK(x.numel() > 0, op, ": the input is empty (shape ", x.sizes(), ") and has no ",
             is_max ? "maximum" : "minimum", ". Hint: pass a dim of non-zero size");
  NoGradGuard no_grad;
  Tensor index = std::get<1>(select_extremum(x.reshape({-1}), 0, false, is_max, false, op));
  return keepdim ? index.reshape(Dims(x.dim(), 1)) : index;
}

// ---- var, std, var_mean (Welford in the backend) -----------------------------------------
// d var / dx = 2 (x - mean) / (N - correction); d mean / dx = 1 / N. For std = sqrt(var)
// the var gradient is g / (2 std), taken as 0 where std == 0 (as PyTorch: the derivative
// of sqrt is infinite there and x - mean is 0). Saves the input and the mean; std also
// its output.

struct VarMeanBackward final : Node {
  SavedTensor x, mean, std_out;  // mean in keepdim form; std_out for std only
  Dims keep_shape;
  double count = 1.0;
  int64_t correction = 1;
  bool has_mean_output = false;  // var_mean: g[1] is the mean's gradient
  const char* op = "";  // a string literal: the public op's name
  std::vector<Tensor> apply(std::vector<Tensor>&& g) override {
    Tensor g_var = g[0].reshape(keep_shape);
    if (std_out.defined()) {
      const Tensor s = std_out.unpack(*this).reshape(keep_shape);
      g_var = where(ne(s, 0.0), div(g_var, mul(s, 2.0)), 0.0);
    }
    const Tensor xv = x.unpack(*this);
    Tensor grad = mul(sub(xv, mean.unpack(*this)), mul(g_var, 2.0 / (count - static_cast<double>(correction))));
    if (has_mean_output) grad = add(grad, div(g[1].reshape(keep_shape), count));
    return {grad};
  }
  void release_saved() override {
    x.release();
    mean.release();
    std_out.release();
  }
  std::string name() const override { return op; }
};

struct Moments {
  Tensor var, mean;
  ReductionPlan plan;
};

Moments moments(const Tensor& x, const Dims& dims, int64_t correction, bool keepdim, const char* op) {
  Moments m;
  m.plan = plan_reduction(x, dims, keepdim, op);
  require_floating(x, op);
  m.var = empty(m.plan.out_shape, {.dtype = x.dtype(), .device = x.device()});
  m.mean = empty(m.plan.out_shape, {.dtype = x.dtype(), .device = x.device()});
  if (m.var.numel() > 0) {
    NoGradGuard no_grad;
    backend(x.device()).var_mean(x, m.plan.dims, correction, m.var.view(m.plan.keep_shape),
                                 m.mean.view(m.plan.keep_shape));
  }
  return m;
}

std::shared_ptr<VarMeanBackward> var_mean_node(const Tensor& x, const Moments& m, int64_t correction, const char* op) {
  auto node = make_pooled<VarMeanBackward>();
  node->x = SavedTensor(x);
  node->mean = SavedTensor(m.mean.view(m.plan.keep_shape));
  node->keep_shape = m.plan.keep_shape;
  node->count = static_cast<double>(m.plan.count);
  node->correction = correction;
  node->op = op;
  return node;
}

// ---- norm ------------------------------------------------------------------------------------
// p = 2: g x / norm; p = 1: g sign(x) (subgradient 0 at x = 0); p = inf: g sign(x) split
// evenly among the tied max |x|; other p: g sign(x) |x|^(p-1) / norm^(p-1). Where the
// norm is 0 the gradient is 0 (as PyTorch). Saves the input and the result.

struct NormBackward final : Node {
  SavedTensor x, out;
  Dims keep_shape, dims;
  double p = 2.0;
  std::vector<Tensor> apply(std::vector<Tensor>&& g) override {
    const Tensor xv = x.unpack(*this);
    const Tensor result = out.unpack(*this).reshape(keep_shape);
    const Tensor gk = g[0].reshape(keep_shape);
    if (p == 1.0) return {mul(sign(xv), gk)};
    if (p == 2.0) return {mul(xv, where(ne(result, 0.0), div(gk, result), 0.0))};
    if (std::isinf(p)) {
      const Tensor mask = extremum_mask(abs(xv), result);
      return {mul(mul(sign(xv), mask), div(gk, sum(mask, dims, /*keepdim=*/true)))};
    }
    Tensor scaled = mul(sign(xv), pow(abs(xv), p - 1.0));
    if (p < 1.0) scaled = where(ne(xv, 0.0), scaled, 0.0);  // |x|^(p-1) is infinite at 0
    return {mul(scaled, where(ne(result, 0.0), div(gk, pow(result, p - 1.0)), 0.0))};
  }
  void release_saved() override {
    x.release();
    out.release();
  }
  std::string name() const override { return "norm"; }
};

Tensor float32_under_autocast(const Tensor& x) { return autocast_input(x, AutocastPolicy::Float32); }

Tensor bool_reduce(const Tensor& x, bool is_all) {
  const char* op = is_all ? "all" : "any";
  KILN_CHECK(x.defined(), op, ": undefined tensor");
  NoGradGuard no_grad;
  const Tensor truth = x.to(DType::Bool);
  // On bools, all = min and any = max; their identities (true, false) are the empty answers.
  return reduce_kernel(is_all ? ReduceOp::Min : ReduceOp::Max, truth, plan_reduction(truth, {}, false, op),
                       DType::Bool);
}

}  // namespace

Tensor sum(const Tensor& x, Dims dims, bool keepdim) {
  return sum_or_mean(float32_under_autocast(x), dims, keepdim, false);
}

Tensor mean(const Tensor& x, Dims dims, bool keepdim) {
  return sum_or_mean(float32_under_autocast(x), dims, keepdim, true);
}

Tensor amax(const Tensor& x, Dims dims, bool keepdim) { return extremum(x, dims, keepdim, true, "amax"); }

Tensor amin(const Tensor& x, Dims dims, bool keepdim) { return extremum(x, dims, keepdim, false, "amin"); }

Tensor max(const Tensor& x) { return extremum(x, {}, false, true, "max"); }

Tensor min(const Tensor& x) { return extremum(x, {}, false, false, "min"); }

std::tuple<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim) {
  return select_extremum(x, dim, keepdim, /*is_max=*/true, /*differentiable=*/true, "max");
}

std::tuple<Tensor, Tensor> min(const Tensor& x, int64_t dim, bool keepdim) {
  return select_extremum(x, dim, keepdim, /*is_max=*/false, /*differentiable=*/true, "min");
}

Tensor argmax(const Tensor& x, std::optional<int64_t> dim, bool keepdim) { return arg_extremum(x, dim, keepdim, true); }

Tensor argmin(const Tensor& x, std::optional<int64_t> dim, bool keepdim) { return arg_extremum(x, dim, keepdim, false); }

Tensor var(const Tensor& x_in, Dims dims, int64_t correction, bool keepdim) {
  const Tensor x = float32_under_autocast(x_in);
  Moments m = moments(x, dims, correction, keepdim, "var");
  if (autograd::any_requires_grad({&x})) autograd::record(var_mean_node(x, m, correction, "var"), {x}, {m.var});
  return m.var;
}

Tensor std(const Tensor& x_in, Dims dims, int64_t correction, bool keepdim) {
  const Tensor x = float32_under_autocast(x_in);
  Moments m = moments(x, dims, correction, keepdim, "std");
  Tensor out;
  {
    NoGradGuard no_grad;
    out = sqrt(m.var);
  }
  if (autograd::any_requires_grad({&x})) {
    auto node = var_mean_node(x, m, correction, "std");
    node->std_out = SavedTensor(out);
    autograd::record(node, {x}, {out});
  }
  return out;
}

std::tuple<Tensor, Tensor> var_mean(const Tensor& x_in, Dims dims, int64_t correction,
                                    bool keepdim) {
  const Tensor x = float32_under_autocast(x_in);
  Moments m = moments(x, dims, correction, keepdim, "var_mean");
  if (autograd::any_requires_grad({&x})) {
    auto node = var_mean_node(x, m, correction, "var_mean");
    node->has_mean_output = true;
    autograd::record(node, {x}, {m.var, m.mean});
  }
  return {m.var, m.mean};
}

Tensor norm(const Tensor& x_in, double p, Dims dims, bool keepdim) {
  const Tensor x = float32_under_autocast(x_in);
  const ReductionPlan plan = plan_reduction(x, dims, keepdim, "norm");
  require_floating(x, "norm");
  KILN_CHECK(p > 0.0, "norm: p must be positive (1, 2, any p > 0, or INFINITY for max |x|), got ", p);
  const bool is_inf = std::isinf(p);
  if (is_inf) require_nonempty(x, plan, "norm", "maximum (p = inf)");
  Tensor out = reduce_kernel(is_inf ? ReduceOp::NormInf : ReduceOp::NormP, x, plan, x.dtype(), {.p = p});
  if (autograd::any_requires_grad({&x})) {
    auto node = make_pooled<NormBackward>();
    node->x = SavedTensor(x);
    node->out = SavedTensor(out);
    node->keep_shape = plan.keep_shape;
    node->dims = plan.dims;
    node->p = p;
    autograd::record(node, {x}, {out});
  }
  return out;
}

// log sum exp(x) = m + log sum exp(x - m) with m = max x, detached: composed from
// differentiable ops, so the gradient (softmax(x) g) comes for free, and m only keeps exp
// from overflowing. Where m is +-inf (or NaN) the shift is 0, as PyTorch: an all -inf slice
// gives -inf, not NaN. Integer inputs compute in float32.
Tensor logsumexp(const Tensor& x_in, Dims dims, bool keepdim) {
  const Tensor x = float32_under_autocast(x_in);
  const ReductionPlan plan = plan_reduction(x, dims, keepdim, "logsumexp");
  const Tensor xf = x.is_floating_point() ? x : x.to(kDefaultFloat);
  Tensor shift;
  {
    NoGradGuard no_grad;
    if (plan.count == 0) {
      shift = zeros(plan.keep_shape, {.dtype = xf.dtype(), .device = xf.device()});
    } else {
      const Tensor m = amax(xf, plan.dims, /*keepdim=*/true);
      shift = where(isfinite(m), m, 0.0);
    }
  }
  const Tensor result = add(log(sum(exp(sub(xf, shift)), plan.dims, /*keepdim=*/true)), shift);
  return keepdim ? result : result.reshape(plan.out_shape);
}

Tensor all(const Tensor& x) { return bool_reduce(x, /*is_all=*/true); }

Tensor any(const Tensor& x) { return bool_reduce(x, /*is_all=*/false); }

}  // namespace kiln
