// In-place ops as Tensor methods, following Note [In-place and autograd] (inplace.h).
#include "core/ops/inplace.h"

#include "core/autograd/grad_mode.h"
#include "core/autograd/node.h"
#include "core/backend.h"
#include "core/ops/copy.h"
#include "core/ops/elementwise.h"
#include "core/ops/factory.h"
#include "core/ops/view.h"

namespace kiln {

void check_inplace_allowed(const Tensor& self, bool recording, const char* op) {
  KILN_CHECK(self.defined(), op, ": undefined tensor");
  if (!recording) return;
  KILN_CHECK(!(self.is_leaf() && self.requires_grad()), op, ": a leaf tensor that requires grad "
             "is being used in an in-place operation; do it under NoGradGuard (as optimizers do) "
             "or on a clone()");
  KILN_CHECK(self.impl()->view_base == nullptr, op, ": in-place operation on a view while "
             "recording gradients is not supported; use the out-of-place op, or clone() first");
}

namespace {

void check_result_fits(const Tensor& self, const Tensor& result, const char* op) {
  KILN_CHECK(result.sizes() == self.sizes(), op, ": the result's shape ", result.sizes(),
             " does not match the in-place destination's shape ", self.sizes(),
             " (an in-place op cannot broadcast its destination)");
  KILN_CHECK(can_cast(result.dtype(), self.dtype()), op, ": result type ", result.dtype(),
             " can't be cast to the desired output type ", self.dtype());
}

}  // namespace

Tensor& apply_inplace(Tensor& self, const std::vector<Tensor>& others, const char* op,
                      const OutOfPlaceFn& out_of_place) {
  std::vector<Tensor> inputs = others;
  inputs.push_back(self);
  const bool recording = autograd::any_requires_grad(inputs);
  check_inplace_allowed(self, recording, op);
  if (!recording) {
    Tensor result = out_of_place(self, others);
    check_result_fits(self, result, op);
    backend(self.device()).copy(result, self, false);
    self.bump_version();
    return self;
  }
  std::vector<Tensor> operands;
  for (const Tensor& other : others) {
    operands.push_back(other.storage().is_alias_of(self.storage()) ? clone(other) : other);
  }
  Tensor result = out_of_place(clone(self), operands);
  check_result_fits(self, result, op);
  if (result.dtype() != self.dtype()) result = result.to(self.dtype());
  {
    NoGradGuard no_grad;
    backend(self.device()).copy(result, self, false);
  }
  self.bump_version();
  autograd::AutogradMeta& meta = autograd::autograd_meta(self);
  meta.grad_fn = result.grad_fn();
  meta.output_nr = autograd::autograd_meta(result).output_nr;
  return self;
}

namespace {

// add_/sub_/mul_/div_: the kernel writes straight into self when nothing is recorded and
// the op's result has self's dtype (the op table's result_dtype); otherwise the general
// path, which refuses a result self cannot hold (div_ of integers, Note [Integer inputs]).
Tensor& binary_inplace(Tensor& self, const Tensor& other, BinaryOp op, double alpha, const char* name,
                       const OutOfPlaceFn& out_of_place) {
  KILN_CHECK(self.defined() && other.defined(), name, ": undefined tensor");
  KILN_CHECK(broadcast_shapes(self.sizes(), other.sizes(), name) == self.sizes(), name, ": the other "
             "operand's shape ", other.sizes(), " does not broadcast to the in-place destination's shape ",
             self.sizes());
  const bool direct = !autograd::any_requires_grad({&self, &other}) && other.dtype() == self.dtype() &&
                      other.device() == self.device() && self.numel() > 0 &&
                      result_dtype(op, self.dtype()) == self.dtype();  // not div_ of integers
  if (!direct) return apply_inplace(self, {other}, name, out_of_place);
  check_inplace_allowed(self, false, name);
  const Tensor b = expand(other, self.sizes());  // also checks that other broadcasts to self
  backend(self.device()).binary(op, self, b, self, {.alpha = alpha});
  self.bump_version();
  return self;
}

}  // namespace

Tensor& Tensor::add_(const Tensor& other, Scalar alpha) {
  return binary_inplace(*this, other, BinaryOp::Add, alpha.to_double(), "add_",
                        [alpha](const Tensor& s, const std::vector<Tensor>& o) { return kiln::add(s, o[0], alpha); });
}

Tensor& Tensor::sub_(const Tensor& other, Scalar alpha) {
  return binary_inplace(*this, other, BinaryOp::Add, -alpha.to_double(), "sub_",
                        [alpha](const Tensor& s, const std::vector<Tensor>& o) { return kiln::sub(s, o[0], alpha); });
}

Tensor& Tensor::mul_(const Tensor& other) {
  return binary_inplace(*this, other, BinaryOp::Mul, 1.0, "mul_",
                        [](const Tensor& s, const std::vector<Tensor>& o) { return kiln::mul(s, o[0]); });
}

Tensor& Tensor::mul_(Scalar other) {
  KILN_CHECK(defined(), "mul_: undefined tensor");
  return mul_(wrap_scalar(other, *this));  // an int tensor times 2.5 is float32: refused, not truncated
}

Tensor& Tensor::div_(const Tensor& other) {
  return binary_inplace(*this, other, BinaryOp::Div, 1.0, "div_",
                        [](const Tensor& s, const std::vector<Tensor>& o) { return kiln::div(s, o[0]); });
}

Tensor& Tensor::clamp_(std::optional<Scalar> min, std::optional<Scalar> max) {
  return apply_inplace(*this, {}, "clamp_", [&](const Tensor& s, const std::vector<Tensor>&) { return kiln::clamp(s, min, max); });
}

Tensor& Tensor::fill_(Scalar value) {
  value.check_representable(dtype(), "fill_");
  const bool recording = autograd::any_requires_grad({this});
  if (recording) return copy_(scalar_tensor(value, {.dtype = dtype(), .device = device()}));
  check_inplace_allowed(*this, false, "fill_");
  if (numel() > 0) backend(device()).fill(*this, value);
  bump_version();
  return *this;
}

Tensor& Tensor::zero_() { return fill_(0); }

Tensor& Tensor::copy_(const Tensor& src, bool non_blocking) { return kiln::copy_(*this, src, non_blocking); }

}  // namespace kiln
