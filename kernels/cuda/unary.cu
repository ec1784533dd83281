// CudaBackend::unary: the op code picks the functor and its dtypes from the shared table
// (kernels/elementwise_ops.h), then the elementwise engine (elementwise.cuh) runs it.
// This file compiles the ops defined for every numeric dtype (neg, abs, sign, square,
// relu, clamp, pow with a scalar exponent) and the Bool-valued predicates (logical_not,
// isnan, isinf, isfinite); the floating-only math ops are in unary_math.cu.
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/elementwise.cuh"
#include "kernels/cuda/elementwise_families.h"
#include "kernels/elementwise_ops.h"

namespace kiln::cuda {

void CudaBackend::unary(UnaryOp op, const Tensor& in, const Tensor& out, const ElementwiseParams& params) {
  elementwise::dispatch_unary(op, params, [&]<DTypeSet kSet, UnaryOp>(const auto& make) {
    if constexpr (kSet.bits == kFloatingTypes.bits) {
      unary_floating(op, in, out, params);
    } else {
      run_unary<kSet>(in, out, op_name(op), make);
    }
  });
}

}  // namespace kiln::cuda
