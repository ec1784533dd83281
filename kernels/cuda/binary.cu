// CudaBackend::binary, and the arithmetic ops (add = a + alpha * b, sub, mul, div,
// maximum, minimum, pow), out dtype = in dtype. The op code's family
// (elementwise_families.h) names the file whose launcher table runs it: comparisons are
// compare.cu, the backward functors binary_backward.cu.
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/elementwise.cuh"
#include "kernels/cuda/elementwise_families.h"

namespace kiln::cuda {

constinit const BinaryLaunchers kBinaryArithmeticLaunchers =
    binary_launchers<ElementwiseFamily::BinaryArithmetic>();

void CudaBackend::binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out,
                         const ElementwiseParams& params) {
  KILN_ASSERT(op < BinaryOp::kCount, "binary: unknown op code ", static_cast<int>(op));
  const ElementwiseFamily family = family_of(op);
  const BinaryLaunchers& launchers = family == ElementwiseFamily::BinaryCompare    ? kBinaryCompareLaunchers
                                     : family == ElementwiseFamily::BinaryBackward ? kBinaryBackwardLaunchers
                                                                                   : kBinaryArithmeticLaunchers;
  launchers[static_cast<size_t>(op)](a, b, out, params);
}

}  // namespace kiln::cuda
