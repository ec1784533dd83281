// Elementwise ops: type promotion, broadcasting, dispatch to the backend's engine, and
// each op's backward right under it (see elementwise.h). exp, log and pow are autocast's
// float32 ops (core/autocast.h): under autocast float16/bfloat16 inputs become float32.
#include "core/ops/elementwise.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "core/autocast.h"
#include "core/autograd/grad_mode.h"
#include "core/autograd/node.h"
#include "core/memory_format.h"
#include "core/ops/copy.h"
#include "core/ops/factory.h"
#include "core/ops/view.h"
#include "core/pooled.h"

namespace kiln {
namespace {

using autograd::Node;
using autograd::SavedTensor;

PromotionOperand promotion_operand(const Tensor& t) {
  using Kind = PromotionOperand::Kind;
  if (t.impl()->wrapped_number) return {t.dtype(), Kind::WrappedNumber};
  return {t.dtype(), t.dim() == 0 ? Kind::ZeroDim : Kind::Dimensioned};
}

// The device an op on a and b runs on. A 0-d CPU tensor may join a tensor on another
// device (it is copied there), as in PyTorch; anything else must match.
Device common_device(const Tensor& a, const Tensor& b, const char* op) {
  if (a.device() == b.device()) return a.device();
  if (a.device().is_cpu() && a.dim() == 0) return b.device();
  if (b.device().is_cpu() && b.dim() == 0) return a.device();
  KILN_CHECK(false, op, ": expected all tensors on the same device, got ", a.device(), " and ",
             b.device());
  return a.device();
}

Tensor wrapped(Scalar value, DType dtype, Device device) {
  Tensor t = scalar_tensor(value, {.dtype = dtype, .device = device});
  t.impl()->wrapped_number = true;
  return t;
}

// `t`'s strides broadcast to `shape` (right-aligned; 0 along a dim it repeats over).
Dims broadcast_strides(const Tensor& t, IntList shape) {
  Dims strides(shape.size(), 0);
  const size_t lead = shape.size() - static_cast<size_t>(t.dim());
  for (size_t d = lead; d < shape.size(); ++d) {
    const size_t k = d - lead;
    if (t.sizes()[k] == shape[d]) strides[d] = t.strides()[k];
  }
  return strides;
}

// Note [Elementwise result layout]: a result is laid out as its inputs are, by PyTorch's
// rule (TensorIterator's): row-major when every input is row-major (the common case,
// decided from the inputs' cached contiguity); when they all have the result's shape,
// channels-last when all are (4-d), or the inputs' own strides when they are the same
// non-overlapping, dense ones (a channels-last 3D activation stays so); otherwise dense in the memory order of the inputs
// broadcast to the result's shape (Note [Memory order of dims]), so a channels-last
// activation plus a per-channel bias is channels-last, and the first input decides
// between two that disagree. One departure: when every input is row-major the result is,
// where PyTorch, given inputs of different shapes whose size-1 dims have odd strides, may
// order dims by those strides.
Tensor empty_result(const Dims& shape, const TensorOptions& options, std::initializer_list<const Tensor*> inputs,
                    const char* op) {
  KILN_ASSERT(inputs.size() <= 3, op, ": ", inputs.size(), " inputs");
  const bool row_major = std::all_of(inputs.begin(), inputs.end(), [](const Tensor* t) { return t->is_contiguous(); });
  if (row_major || shape.size() < 2 || checked_numel(shape, op) == 0) return empty(shape, options, op);
  const bool same_shape = std::all_of(inputs.begin(), inputs.end(), [&](const Tensor* t) { return t->sizes() == shape; });
  if (same_shape && shape.size() == 4 && std::all_of(inputs.begin(), inputs.end(), [](const Tensor* t) {
        return t->is_contiguous(MemoryFormat::ChannelsLast);
      })) {
    return empty(shape, options, MemoryFormat::ChannelsLast);  // PyTorch checks only the 4-d format here
  }
  const Tensor& first = **inputs.begin();
  const bool alike = same_shape && std::all_of(inputs.begin(), inputs.end(), [&](const Tensor* t) {
    return t->strides() == first.strides();
  });
  if (alike && is_non_overlapping_and_dense(first.sizes(), first.strides())) {
    return empty_strided(shape, first.strides(), options);
  }
  std::array<Dims, 3> strides;
  size_t n = 0;
  for (const Tensor* t : inputs) strides[n++] = broadcast_strides(*t, shape);
  std::array<IntList, 3> lists;
  for (size_t i = 0; i < n; ++i) lists[i] = strides[i];
  // Still in row-major order (a broadcast of row-major operands, a backward's expanded
  // gradient): the plain allocation, whose layout needs no computing.
  Dims dense = dense_strides_in_memory_order(shape, std::span<const IntList>(lists.data(), n));
  return dense.empty() ? empty(shape, options) : empty_strided(shape, dense, options);
}

// `t` broadcast to `out`'s shape; itself when it has that shape already (no view made).
Tensor expanded_to(const Tensor& t, const Tensor& out) {
  return t.sizes() == out.sizes() ? t : expand(t, out.sizes());
}

}  // namespace

Tensor wrap_scalar(Scalar value, const Tensor& like) {
  KILN_CHECK(like.defined(), "wrap_scalar: undefined tensor");
  const DType dtype = result_type({promotion_operand(like), {value.kind(), PromotionOperand::Kind::WrappedNumber}});
  return wrapped(value, dtype, like.device());
}

Tensor binary_kernel(BinaryOp op, const Tensor& a, const Tensor& b, const ElementwiseParams& params) {
  const char* name = op_name(op);
  KILN_CHECK(a.defined() && b.defined(), name, ": undefined tensor");
  const DType promoted = result_type({promotion_operand(a), promotion_operand(b)});
  const DType compute = compute_dtype(op, promoted);  // div of integers: float32
  const DType out_dtype = result_dtype(op, promoted);
  const Device device = common_device(a, b, name);
  NoGradGuard no_grad;
  const Tensor ac = to(a, device, compute);
  const Tensor bc = to(b, device, compute);
  Tensor out =
      empty_result(broadcast_shapes(a.sizes(), b.sizes(), name), {.dtype = out_dtype, .device = device}, {&a, &b}, name);
  if (out.numel() > 0) backend(device).binary(op, expanded_to(ac, out), expanded_to(bc, out), out, params);
  return out;
}

Tensor unary_kernel(UnaryOp op, const Tensor& x, const ElementwiseParams& params) {
  const char* name = op_name(op);
  KILN_CHECK(x.defined(), name, ": undefined tensor");
  KILN_CHECK(is_floating(x.dtype()) || !refuses_integers(op), name, ": expected a floating-point tensor, got ",
             x.dtype());  // Note [Integer inputs]: gelu of integers
  const DType compute = compute_dtype(op, x.dtype());  // exp of integers: float32
  const DType out_dtype = result_dtype(op, x.dtype());
  NoGradGuard no_grad;
  const Tensor xc = to(x, x.device(), compute);
  Tensor out = empty_result(x.sizes(), {.dtype = out_dtype, .device = x.device()}, {&x}, name);
  if (out.numel() > 0) backend(x.device()).unary(op, xc, out, params);
  return out;
}

// ---- add / sub: d(a + alpha b) = (g, alpha g), summed over broadcast dims ---------------

namespace {

struct AddBackward final : Node {
  Dims a_sizes, b_sizes;
  DType a_dtype = kDefaultFloat, b_dtype = kDefaultFloat;
  double alpha = 1.0;  // sub records -alpha
  const char* op = "";  // a string literal: the public op's name
  std::vector<Tensor> apply(std::vector<Tensor>&& g) override {
    Tensor ga, gb;
    if (needs_input_grad(0)) ga = sum_to(g[0], a_sizes).to(a_dtype);
    if (needs_input_grad(1)) gb = sum_to(alpha == 1.0 ? g[0] : mul(g[0], alpha), b_sizes).to(b_dtype);
    return {ga, gb};
  }
  std::string name() const override { return op; }
};

Tensor add_impl(const Tensor& a, const Tensor& b, double alpha, const char* op) {
  Tensor out = binary_kernel(BinaryOp::Add, a, b, {.alpha = alpha});
  if (autograd::any_requires_grad({&a, &b})) {
    auto node = make_pooled<AddBackward>();
    node->a_sizes = a.sizes();
    node->b_sizes = b.sizes();
    node->a_dtype = a.dtype();
    node->b_dtype = b.dtype();
    node->alpha = alpha;
    node->op = op;
    autograd::record(node, {a, b}, {out});
  }
  return out;
}

}  // namespace

Tensor add(const Tensor& a, const Tensor& b, Scalar alpha) { return add_impl(a, b, alpha.to_double(), "add"); }
Tensor sub(const Tensor& a, const Tensor& b, Scalar alpha) { return add_impl(a, b, -alpha.to_double(), "sub"); }
Tensor add(const Tensor& a, Scalar b) { return add(a, wrap_scalar(b, a)); }
Tensor sub(const Tensor& a, Scalar b) { return sub(a, wrap_scalar(b, a)); }

// ---- mul: d(a b) = (g b, g a) ------------------------------------------------------------
// Saves b only if a needs a gradient and a only if b does.

namespace {

struct MulBackward final : Node {
  SavedTensor a, b;
  Dims a_sizes, b_sizes;
  DType a_dtype = kDefaultFloat, b_dtype = kDefaultFloat;
  std::vector<Tensor> apply(std::vector<Tensor>&& g) override {
    Tensor ga, gb;
    if (needs_input_grad(0)) ga = sum_to(mul(g[0], b.unpack(*this)), a_sizes).to(a_dtype);
    if (needs_input_grad(1)) gb = sum_to(mul(g[0], a.unpack(*this)), b_sizes).to(b_dtype);
    return {ga, gb};
  }
  void release_saved() override {
    a.release();
    b.release();
  }
  std::string name() const override { return "mul"; }
};

// d(a / b) = (g / b, -g a / b^2 = -g out / b). Saves b, and out if b needs a gradient.
struct DivBackward final : Node {
  SavedTensor b, out;
  Dims a_sizes, b_sizes;
  DType a_dtype = kDefaultFloat, b_dtype = kDefaultFloat;
  std::vector<Tensor> apply(std::vector<Tensor>&& g) override {
    const Tensor bv = b.unpack(*this);
    Tensor ga, gb;
    if (needs_input_grad(0)) ga = sum_to(div(g[0], bv), a_sizes).to(a_dtype);
    if (needs_input_grad(1)) gb = sum_to(neg(div(mul(g[0], out.unpack(*this)), bv)), b_sizes).to(b_dtype);
    return {ga, gb};
  }
  void release_saved() override {
    b.release();
    out.release();
  }
  std::string name() const override { return "div"; }
};

}  // namespace

Tensor mul(const Tensor& a, const Tensor& b) {
  Tensor out = binary_kernel(BinaryOp::Mul, a, b);
  if (autograd::any_requires_grad({&a, &b})) {
    auto node = make_pooled<MulBackward>();
    if (b.requires_grad()) node->a = SavedTensor(a);
    if (a.requires_grad()) node->b = SavedTensor(b);
    node->a_sizes = a.sizes();
    node->b_sizes = b.sizes();
    node->a_dtype = a.dtype();
    node->b_dtype = b.dtype();
    autograd::record(node, {a, b}, {out});
  }
  return out;
}

Tensor mul(const Tensor& a, Scalar b) { return mul(a, wrap_scalar(b, a)); }

Tensor div(const Tensor& a, const Tensor& b) {
  Tensor out = binary_kernel(BinaryOp::Div, a, b);
  if (autograd::any_requires_grad({&a, &b})) {
    auto node = make_pooled<DivBackward>();
    node->b = SavedTensor(b);
    if (b.requires_grad()) node->out = SavedTensor(out);
    node->a_sizes = a.sizes();
    node->b_sizes = b.sizes();
    node->a_dtype = a.dtype();
    node->b_dtype = b.dtype();
    autograd::record(node, {a, b}, {out});
  }
  return out;
}

Tensor div(const Tensor& a, Scalar b) { return div(a, wrap_scalar(b, a)); }

Tensor operator+(Scalar a, const Tensor& b) { return add(wrap_scalar(a, b), b); }
Tensor operator-(Scalar a, const Tensor& b) { return sub(wrap_scalar(a, b), b); }
Tensor operator*(Scalar a, const Tensor& b) { return mul(wrap_scalar(a, b), b); }
Tensor operator/(Scalar a, const Tensor& b) { return div(wrap_scalar(a, b), b); }

// ---- unary ops whose backward is a formula of the input or output ------------------------

namespace {

// Backward of a unary op as a function of the saved input x, the saved output y and g.
struct UnaryFormulaBackward final : Node {
  using Formula = Tensor (*)(const Tensor& g, const Tensor& x, const Tensor& y, double param);
  Formula formula = nullptr;
  SavedTensor x, y;
  double param = 0.0;
  DType input_dtype = kDefaultFloat;
  const char* op = "";  // a string literal: the public op's name
  std::vector<Tensor> apply(std::vector<Tensor>&& g) override {
    const Tensor xv = x.defined() ? x.unpack(*this) : Tensor();
    const Tensor yv = y.defined() ? y.unpack(*this) : Tensor();
    return {formula(g[0], xv, yv, param).to(input_dtype)};
  }
  void release_saved() override {
    x.release();
    y.release();
  }
  std::string name() const override { return op; }
};

enum class Save { Input, Output, Nothing };

Tensor unary_with_formula(UnaryOp kernel, const Tensor& x, const char* op, Save save,
                          UnaryFormulaBackward::Formula formula, const ElementwiseParams& params = {},
                          double param = 0.0) {
  Tensor out = unary_kernel(kernel, x, params);
  if (autograd::any_requires_grad({&x})) {
    auto node = make_pooled<UnaryFormulaBackward>();
    node->formula = formula;
    if (save == Save::Input) node->x = SavedTensor(x);
    if (save == Save::Output) node->y = SavedTensor(out);
    node->param = param;
    node->input_dtype = x.dtype();
    node->op = op;
    autograd::record(node, {x}, {out});
  }
  return out;
}

}  // namespace

Tensor neg(const Tensor& x) {
  KILN_CHECK(x.dtype() != DType::Bool, "neg: not supported for bool tensors; use logical_not");
  return unary_with_formula(UnaryOp::Neg, x, "neg", Save::Nothing,
                            [](const Tensor& g, const Tensor&, const Tensor&, double) { return neg(g); });
}

// abs: sign(x) g; at x = 0 the subgradient 0 (sign(0) = 0), as PyTorch.
Tensor abs(const Tensor& x) {
  return unary_with_formula(UnaryOp::Abs, x, "abs", Save::Input,
                            [](const Tensor& g, const Tensor& xv, const Tensor&, double) { return mul(g, sign(xv)); });
}

Tensor sign(const Tensor& x) {
  return unary_with_formula(UnaryOp::Sign, x, "sign", Save::Nothing,
                            [](const Tensor& g, const Tensor&, const Tensor&, double) { return zeros_like(g); });
}

Tensor square(const Tensor& x) {
  return unary_with_formula(UnaryOp::Square, x, "square", Save::Input,
                            [](const Tensor& g, const Tensor& xv, const Tensor&, double) { return mul(mul(g, xv), 2.0); });
}

// sqrt: g / (2 sqrt(x)) = g / (2 y).
Tensor sqrt(const Tensor& x) {
  return unary_with_formula(UnaryOp::Sqrt, x, "sqrt", Save::Output,
                            [](const Tensor& g, const Tensor&, const Tensor& y, double) { return div(g, mul(y, 2.0)); });
}

// rsqrt: -g / (2 x^1.5) = -0.5 g y^3.
Tensor rsqrt(const Tensor& x) {
  return unary_with_formula(UnaryOp::Rsqrt, x, "rsqrt", Save::Output,
                            [](const Tensor& g, const Tensor&, const Tensor& y, double) {
                              return mul(mul(g, mul(y, square(y))), -0.5);
                            });
}

Tensor exp(const Tensor& x_in) {
  const Tensor x = autocast_input(x_in, AutocastPolicy::Float32);
  return unary_with_formula(UnaryOp::Exp, x, "exp", Save::Output,
                            [](const Tensor& g, const Tensor&, const Tensor& y, double) { return mul(g, y); });
}

Tensor log(const Tensor& x_in) {
  const Tensor x = autocast_input(x_in, AutocastPolicy::Float32);
  return unary_with_formula(UnaryOp::Log, x, "log", Save::Input,
                            [](const Tensor& g, const Tensor& xv, const Tensor&, double) { return div(g, xv); });
}

// reciprocal: -g / x^2 = -g y^2.
Tensor reciprocal(const Tensor& x) {
  return unary_with_formula(UnaryOp::Reciprocal, x, "reciprocal", Save::Output,
                            [](const Tensor& g, const Tensor&, const Tensor& y, double) { return neg(mul(g, square(y))); });
}

// pow(x, e) for a number e: g e x^(e-1). e = 0 gives a zero gradient everywhere.
Tensor pow(const Tensor& base_in, Scalar exponent) {
  KILN_CHECK(base_in.defined(), "pow: undefined tensor");
  const Tensor base = autocast_input(base_in, AutocastPolicy::Float32);
  const Tensor promoted = base.to(wrap_scalar(exponent, base).dtype());
  const double e = exponent.to_double();
  return unary_with_formula(
      UnaryOp::PowScalar, promoted, "pow", Save::Input,
      [](const Tensor& g, const Tensor& xv, const Tensor&, double e) {
        if (e == 0.0) return zeros_like(g);
        return mul(mul(g, pow(xv, e - 1.0)), e);
      },
      {.beta = e}, e);
}

// clamp: g where min <= x <= max (bounds included, as PyTorch), else 0.
Tensor clamp(const Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max) {
  KILN_CHECK(min || max, "clamp: at least one of min and max must be given");
  constexpr double kInf = std::numeric_limits<double>::infinity();
  const ElementwiseParams params{.lower = min ? min->to_double() : -kInf, .upper = max ? max->to_double() : kInf};
  Tensor out = unary_kernel(UnaryOp::Clamp, x, params);
  if (autograd::any_requires_grad({&x})) {
    struct ClampBackward final : Node {
      SavedTensor x;
      ElementwiseParams params;
      std::vector<Tensor> apply(std::vector<Tensor>&& g) override {
        return {binary_kernel(BinaryOp::ClampBackward, g[0], x.unpack(*this), params)};
      }
      void release_saved() override { x.release(); }
      std::string name() const override { return "clamp"; }
    };
    auto node = make_pooled<ClampBackward>();
    node->x = SavedTensor(x);
    node->params = params;
    autograd::record(node, {x}, {out});
  }
  return out;
}

// ---- pow(tensor, tensor), maximum, minimum -------------------------------------------------

namespace {

// d(a^b) = (g b a^(b-1), g a^b ln a); the second is 0 where a == 0 and b >= 0 (the limit).
struct PowBackward final : Node {
  SavedTensor a, b, out;
  Dims a_sizes, b_sizes;
  DType a_dtype = kDefaultFloat, b_dtype = kDefaultFloat;
  std::vector<Tensor> apply(std::vector<Tensor>&& g) override {
    const Tensor av = a.unpack(*this), bv = b.unpack(*this);
    Tensor ga, gb;
    if (needs_input_grad(0)) {
      const Tensor d = where(eq(bv, 0.0), zeros_like(av), mul(bv, pow(av, sub(bv, 1.0))));
      ga = sum_to(mul(g[0], d), a_sizes).to(a_dtype);
    }
    if (needs_input_grad(1)) {
      const Tensor d = mul(out.unpack(*this), log(av));
      const Tensor safe = where(logical_and(eq(av, 0.0), ge(bv, 0.0)), zeros_like(d), d);
      gb = sum_to(mul(g[0], safe), b_sizes).to(b_dtype);
    }
    return {ga, gb};
  }
  void release_saved() override {
    a.release();
    b.release();
    out.release();
  }
  std::string name() const override { return "pow"; }
};

// maximum/minimum: the gradient goes to the larger (smaller) input; ties split it evenly.
struct MaxMinBackward final : Node {
  SavedTensor a, b;
  bool is_max = true;
  Dims a_sizes, b_sizes;
  DType a_dtype = kDefaultFloat, b_dtype = kDefaultFloat;
  std::vector<Tensor> apply(std::vector<Tensor>&& g) override {
    const Tensor av = a.unpack(*this), bv = b.unpack(*this);
    const Tensor a_wins = is_max ? gt(av, bv) : lt(av, bv);
    const Tensor tie = eq(av, bv);
    const Tensor half = mul(g[0], 0.5);
    const Tensor zero = zeros_like(g[0]);
    Tensor ga, gb;
    if (needs_input_grad(0)) ga = sum_to(where(tie, half, where(a_wins, g[0], zero)), a_sizes).to(a_dtype);
    if (needs_input_grad(1)) {
      const Tensor b_wins = logical_not(logical_or(a_wins, tie));
      gb = sum_to(where(tie, half, where(b_wins, g[0], zero)), b_sizes).to(b_dtype);
    }
    return {ga, gb};
  }
  void release_saved() override {
    a.release();
    b.release();
  }
  std::string name() const override { return is_max ? "maximum" : "minimum"; }
};

template <typename NodeT>
void fill_binary_meta(NodeT& node, const Tensor& a, const Tensor& b) {
  node.a_sizes = a.sizes();
  node.b_sizes = b.sizes();
  node.a_dtype = a.dtype();
  node.b_dtype = b.dtype();
}

Tensor max_min(const Tensor& a, const Tensor& b, bool is_max) {
  Tensor out = binary_kernel(is_max ? BinaryOp::Maximum : BinaryOp::Minimum, a, b);
  if (autograd::any_requires_grad({&a, &b})) {
    auto node = make_pooled<MaxMinBackward>();
    node->a = SavedTensor(a);
    node->b = SavedTensor(b);
    node->is_max = is_max;
    fill_binary_meta(*node, a, b);
    autograd::record(node, {a, b}, {out});
  }
  return out;
}

}  // namespace

Tensor pow(const Tensor& base_in, const Tensor& exponent_in) {
  const Tensor base = autocast_input(base_in, AutocastPolicy::Float32);
  const Tensor exponent = autocast_input(exponent_in, AutocastPolicy::Float32);
  Tensor out = binary_kernel(BinaryOp::Pow, base, exponent);
  if (autograd::any_requires_grad({&base, &exponent})) {
    auto node = make_pooled<PowBackward>();
    node->a = SavedTensor(base);
    node->b = SavedTensor(exponent);
    if (exponent.requires_grad()) node->out = SavedTensor(out);
    fill_binary_meta(*node, base, exponent);
    autograd::record(node, {base, exponent}, {out});
  }
  return out;
}

Tensor maximum(const Tensor& a, const Tensor& b) { return max_min(a, b, true); }
Tensor minimum(const Tensor& a, const Tensor& b) { return max_min(a, b, false); }

// ---- comparisons and logic ------------------------------------------------------------------

Tensor eq(const Tensor& a, const Tensor& b) { return binary_kernel(BinaryOp::Eq, a, b); }
Tensor ne(const Tensor& a, const Tensor& b) { return binary_kernel(BinaryOp::Ne, a, b); }
Tensor lt(const Tensor& a, const Tensor& b) { return binary_kernel(BinaryOp::Lt, a, b); }
Tensor le(const Tensor& a, const Tensor& b) { return binary_kernel(BinaryOp::Le, a, b); }
Tensor gt(const Tensor& a, const Tensor& b) { return binary_kernel(BinaryOp::Gt, a, b); }
Tensor ge(const Tensor& a, const Tensor& b) { return binary_kernel(BinaryOp::Ge, a, b); }
Tensor eq(const Tensor& a, Scalar b) { return eq(a, wrap_scalar(b, a)); }
Tensor ne(const Tensor& a, Scalar b) { return ne(a, wrap_scalar(b, a)); }
Tensor lt(const Tensor& a, Scalar b) { return lt(a, wrap_scalar(b, a)); }
Tensor le(const Tensor& a, Scalar b) { return le(a, wrap_scalar(b, a)); }
Tensor gt(const Tensor& a, Scalar b) { return gt(a, wrap_scalar(b, a)); }
Tensor ge(const Tensor& a, Scalar b) { return ge(a, wrap_scalar(b, a)); }
Tensor logical_and(const Tensor& a, const Tensor& b) { return binary_kernel(BinaryOp::LogicalAnd, a, b); }
Tensor logical_or(const Tensor& a, const Tensor& b) { return binary_kernel(BinaryOp::LogicalOr, a, b); }
Tensor logical_not(const Tensor& x) { return unary_kernel(UnaryOp::LogicalNot, x); }
Tensor isnan(const Tensor& x) { return unary_kernel(UnaryOp::IsNan, x); }
Tensor isinf(const Tensor& x) { return unary_kernel(UnaryOp::IsInf, x); }
Tensor isfinite(const Tensor& x) { return unary_kernel(UnaryOp::IsFinite, x); }

// ---- where: d = (where(cond, g, 0), where(cond, 0, g)) ---------------------------------------

namespace {

struct WhereBackward final : Node {
  SavedTensor cond;
  Dims a_sizes, b_sizes;
  DType a_dtype = kDefaultFloat, b_dtype = kDefaultFloat;
  std::vector<Tensor> apply(std::vector<Tensor>&& g) override {
    const Tensor c = cond.unpack(*this);
    const Tensor zero = zeros_like(g[0]);
    Tensor ga, gb;
    if (needs_input_grad(1)) ga = sum_to(where(c, g[0], zero), a_sizes).to(a_dtype);
    if (needs_input_grad(2)) gb = sum_to(where(c, zero, g[0]), b_sizes).to(b_dtype);
    return {Tensor(), ga, gb};
  }
  void release_saved() override { cond.release(); }
  std::string name() const override { return "where"; }
};

}  // namespace

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  KILN_CHECK(cond.defined() && a.defined() && b.defined(), "where: undefined tensor");
  KILN_CHECK(cond.dtype() == DType::Bool, "where: condition must be bool, got ", cond.dtype());
  const DType dtype = result_type({promotion_operand(a), promotion_operand(b)});
  const Device device = common_device(a, b, "where");
  KILN_CHECK(cond.device() == device || (cond.device().is_cpu() && cond.dim() == 0),
             "where: condition on ", cond.device(), " but values on ", device);
  const Dims shape =
      broadcast_shapes(cond.sizes(), broadcast_shapes(a.sizes(), b.sizes(), "where"), "where");
  Tensor out = empty_result(shape, {.dtype = dtype, .device = device}, {&cond, &a, &b}, "where");
  {
    NoGradGuard no_grad;
    if (out.numel() > 0) {
      backend(device).where(expanded_to(to(cond, device, DType::Bool), out), expanded_to(to(a, device, dtype), out),
                            expanded_to(to(b, device, dtype), out), out);
    }
  }
  if (autograd::any_requires_grad({&a, &b})) {
    auto node = make_pooled<WhereBackward>();
    node->cond = SavedTensor(cond);
    node->a_sizes = a.sizes();
    node->b_sizes = b.sizes();
    node->a_dtype = a.dtype();
    node->b_dtype = b.dtype();
    autograd::record(node, {cond, a, b}, {out});
  }
  return out;
}

Tensor where(const Tensor& cond, const Tensor& a, Scalar b) { return where(cond, a, wrap_scalar(b, a)); }

}  // namespace kiln
