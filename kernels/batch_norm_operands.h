// The operand checks every backend's batch-norm launchers make, one per piece (Note
// [Batch norm pieces] and Note [Batch norm, add and ReLU] in core/backend.h), returning
// what the launcher dispatches on: the big operands share the
// input's shape, dtype, device and channel order (kernels/channel_layout.h); the
// per-channel ones are contiguous [C] in the statistics dtype; and the fused tail's
// tensors come only with the ReLU. Violations are the framework's bugs (the ops in
// core/ops/batch_norm.cpp build the operands), so these are assertions.
#pragma once

#include <initializer_list>

#include "core/backend.h"
#include "core/error.h"
#include "kernels/batch_norm_math.h"
#include "kernels/channel_layout.h"

namespace kiln {

// A kernel operand's data, or null for an undefined (absent) one.
template <typename S>
const S* data_or_null(const Tensor& t) {
  return t.defined() ? static_cast<const S*>(t.data_ptr()) : nullptr;
}

// Checks the operands and returns the input's channel order: the big operands must share it.
inline ChannelOrder check_batch_norm_operands(const char* op, const Tensor& input,
                                              std::initializer_list<const Tensor*> same_shape,
                                              std::initializer_list<const Tensor*> per_channel) {
  KILN_ASSERT(input.dim() >= 2, op, ": input ", input.sizes(), " must be [N, C, *]");
  const ChannelOrder order = channel_order(input, op);
  const DType stats = input.dtype() == DType::Float64 ? DType::Float64 : DType::Float32;
  for (const Tensor* t : same_shape) {
    if (!t->defined()) continue;
    KILN_ASSERT(t->sizes() == input.sizes() && t->dtype() == input.dtype() && has_channel_order(*t, order) &&
                    t->device() == input.device(),
                op, ": operand ", t->sizes(), " ", t->dtype(), " strides ", t->strides(),
                " does not match input ", input.sizes(), " ", input.dtype(), " strides ", input.strides());
  }
  for (const Tensor* t : per_channel) {
    if (!t->defined()) continue;
    KILN_ASSERT(t->dim() == 1 && t->numel() == input.sizes()[1] && t->dtype() == stats &&
                    t->is_contiguous() && t->device() == input.device(),
                op, ": per-channel operand ", t->sizes(), " ", t->dtype(), " for input ", input.sizes(), " ",
                input.dtype());
  }
  return order;
}

// What a launcher dispatches on once its operands are checked: the input's channel order
// and the tail its kernel applies (for backward_input, None or Relu).
struct BatchNormCall {
  ChannelOrder order;
  batch_norm_math::Tail tail;
};

inline ChannelOrder check_stats(const Tensor& input, const Tensor& mean, const Tensor& var) {
  return check_batch_norm_operands("batch_norm_stats", input, {}, {&mean, &var});
}

// apply: the residual add needs the ReLU, and backward's `output` is not apply's.
inline BatchNormCall check_apply(const Tensor& input, const BatchNormCoefficients& norm, const Tensor& out) {
  constexpr const char* kOp = "batch_norm_apply";
  KILN_ASSERT(!norm.residual.defined() || norm.relu, kOp, ": a residual is added only before the fused ReLU");
  KILN_ASSERT(!norm.output.defined(), kOp, ": the output is backward_reduce's operand");
  return {check_batch_norm_operands(kOp, input, {&out, &norm.residual},
                                    {&norm.mean, &norm.invstd, &norm.weight, &norm.bias}),
          batch_norm_math::tail_of(norm.relu, norm.residual.defined())};
}

// backward_reduce: the mask comes from y (relu, invstd given) or from the fused add's
// output, and grad_y is written exactly when it does.
inline BatchNormCall check_backward_reduce(const Tensor& grad_out, const Tensor& input,
                                           const BatchNormCoefficients& norm, const Tensor& sum_dy,
                                           const Tensor& sum_dy_xmu, const Tensor& grad_y) {
  constexpr const char* kOp = "batch_norm_backward_reduce";
  KILN_ASSERT(!norm.residual.defined(), kOp, ": backward reads the fused add's output, not its residual");
  KILN_ASSERT(!norm.output.defined() || norm.relu, kOp, ": an output mask comes only with the fused ReLU");
  KILN_ASSERT(norm.output.defined() == grad_y.defined(), kOp,
              ": grad_y is written exactly with an output mask");
  KILN_ASSERT(!norm.relu || norm.output.defined() || norm.invstd.defined(), kOp, ": relu needs invstd");
  return {
      check_batch_norm_operands(kOp, input, {&grad_out, &norm.output, &grad_y},
                                {&norm.mean, &norm.invstd, &norm.weight, &norm.bias, &sum_dy, &sum_dy_xmu}),
      batch_norm_math::tail_of(norm.relu, norm.output.defined())};
}

// backward_input: the fused add's backward passes its grad_y with the ReLU off.
inline BatchNormCall check_backward_input(const Tensor& grad_out, const Tensor& input,
                                          const BatchNormCoefficients& norm, const Tensor& sum_dy,
                                          const Tensor& sum_dy_xmu, int64_t count, const Tensor& grad_in) {
  constexpr const char* kOp = "batch_norm_backward_input";
  KILN_ASSERT(!norm.residual.defined() && !norm.output.defined(), kOp,
              ": the fused add's backward passes grad_y with relu off");
  KILN_ASSERT(count > 0, kOp, ": count ", count);
  return {
      check_batch_norm_operands(kOp, input, {&grad_out, &grad_in},
                                {&norm.mean, &norm.invstd, &norm.weight, &norm.bias, &sum_dy, &sum_dy_xmu}),
      batch_norm_math::tail_of(norm.relu, false)};
}

// A backward reduction's operands (checked by the caller) as the kernels take them.
template <typename T, typename V>
batch_norm_math::GradOperands<T, V> grad_operands(const Tensor& grad_out, const Tensor& input,
                                                  const BatchNormCoefficients& norm, const Tensor& grad_y) {
  return {data_or_null<T>(grad_out),    data_or_null<T>(input),
          data_or_null<T>(norm.output), grad_y.defined() ? static_cast<T*>(grad_y.data_ptr()) : nullptr,
          data_or_null<V>(norm.mean),   data_or_null<V>(norm.invstd),
          data_or_null<V>(norm.weight), data_or_null<V>(norm.bias)};
}

}  // namespace kiln
