// CudaBackend::binary: the op code picks the functor and its dtypes from the shared table
// (kernels/elementwise_ops.h), then the elementwise engine (elementwise.cuh) runs it.
// This file compiles the arithmetic ops (add = a + alpha * b, sub, mul, div, maximum,
// minimum, pow), out dtype = in dtype; comparisons are in compare.cu and the backward
// functors in binary_backward.cu.
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/elementwise.cuh"
#include "kernels/cuda/elementwise_families.h"
#include "kernels/elementwise_ops.h"

namespace kiln::cuda {

void CudaBackend::binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out,
                         const ElementwiseParams& params) {
  elementwise::dispatch_binary(op, params, [&]<DTypeSet kSet, BinaryOp kOp>(const auto& make) {
    if constexpr (elementwise::returns_bool(kOp)) {
      binary_compare(op, a, b, out);
    } else if constexpr (elementwise::is_backward(kOp)) {
      binary_backward(op, a, b, out, params);
    } else {
      run_binary<kSet>(a, b, out, op_name(op), make);
    }
  });
}

}  // namespace kiln::cuda
