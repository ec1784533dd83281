// CudaBackend::unary, and the unary ops defined for every numeric dtype (neg, abs, sign,
// square, relu, clamp, pow with a scalar exponent) with the Bool-valued predicates
// (logical_not, isnan, isinf, isfinite). The op code's family (elementwise_families.h)
// names the file whose launcher table runs it; the floating-only math is unary_math.cu.
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/elementwise.cuh"
#include "kernels/cuda/elementwise_families.h"

namespace kiln::cuda {

constinit const UnaryLaunchers kUnaryNumericLaunchers = unary_launchers<ElementwiseFamily::UnaryNumeric>();

void CudaBackend::unary(UnaryOp op, const Tensor& in, const Tensor& out, const ElementwiseParams& params) {
  KILN_ASSERT(op < UnaryOp::kCount, "unary: unknown op code ", static_cast<int>(op));
  const UnaryLaunchers& launchers =
      family_of(op) == ElementwiseFamily::UnaryFloating ? kUnaryFloatingLaunchers : kUnaryNumericLaunchers;
  launchers[static_cast<size_t>(op)](in, out, params);
}

}  // namespace kiln::cuda
