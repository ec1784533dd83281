// Entry points between the CUDA elementwise files. CudaBackend::unary (unary.cu) and
// CudaBackend::binary (binary.cu) dispatch through the shared op table
// (kernels/elementwise_ops.h) and hand the ops compiled elsewhere to these, so each
// family's kernels are instantiated in one file only (compile time, STYLE 17).
#pragma once

#include "core/backend.h"

namespace kiln::cuda {

// unary_math.cu: the floating-only unary ops (sqrt, exp, sigmoid, gelu, ...).
void unary_floating(UnaryOp op, const Tensor& in, const Tensor& out, const ElementwiseParams& params);
// compare.cu: comparisons and logical ops, Bool out.
void binary_compare(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out);
// binary_backward.cu: the activations' backward functors f(grad_out, saved).
void binary_backward(BinaryOp op, const Tensor& grad_out, const Tensor& saved, const Tensor& grad_in,
                     const ElementwiseParams& params);
// copy.cu: dst = cast(src) on one device, any strides and dtypes (the engine).
void copy_on_device(const Tensor& src, const Tensor& dst);

}  // namespace kiln::cuda
