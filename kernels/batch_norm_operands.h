// The operand checks every backend's batch-norm kernels make (Note [Batch norm pieces]
// and Note [Batch norm, add and ReLU] in core/backend.h): the big operands share the
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

// apply's tail: the residual add needs the ReLU, and backward's `output` is not apply's.
inline batch_norm_math::Tail apply_tail(const char* op, const BatchNormCoefficients& norm) {
  KILN_ASSERT(!norm.residual.defined() || norm.relu, op, ": a residual is added only before the fused ReLU");
  KILN_ASSERT(!norm.output.defined(), op, ": the output is backward_reduce's operand");
  return batch_norm_math::tail_of(norm.relu, norm.residual.defined());
}

// backward_reduce's tail: the mask comes from y (relu, invstd given) or from the fused
// add's output, and grad_y is written exactly when it does.
inline batch_norm_math::Tail backward_reduce_tail(const char* op, const BatchNormCoefficients& norm,
                                                  const Tensor& grad_y) {
  KILN_ASSERT(!norm.residual.defined(), op, ": backward reads the fused add's output, not its residual");
  KILN_ASSERT(!norm.output.defined() || norm.relu, op, ": an output mask comes only with the fused ReLU");
  KILN_ASSERT(norm.output.defined() == grad_y.defined(), op,
              ": grad_y is written exactly with an output mask");
  KILN_ASSERT(!norm.relu || norm.output.defined() || norm.invstd.defined(), op, ": relu needs invstd");
  return batch_norm_math::tail_of(norm.relu, norm.output.defined());
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

// backward_input's mask: the fused add's backward passes its grad_y with the ReLU off.
inline bool backward_input_relu(const char* op, const BatchNormCoefficients& norm) {
  KILN_ASSERT(!norm.residual.defined() && !norm.output.defined(), op,
              ": the fused add's backward passes grad_y with relu off");
  return norm.relu;
}

}  // namespace kiln
