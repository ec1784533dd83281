// Comparisons and logical ops on CUDA (eq, ne, lt, le, gt, ge, logical_and, logical_or):
// inputs of any dtype, a Bool output (one byte, 0 or 1). Half/BFloat16 compare as float,
// which is exact. CudaBackend::binary (binary.cu) routes here.
#include "kernels/cuda/elementwise.cuh"
#include "kernels/cuda/elementwise_families.h"
#include "kernels/elementwise_ops.h"

namespace kiln::cuda {

void binary_compare(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
  elementwise::dispatch_binary(op, ElementwiseParams{}, [&]<DTypeSet kSet, BinaryOp kOp>(const auto& make) {
    if constexpr (elementwise::returns_bool(kOp)) {
      run_binary<kSet>(a, b, out, op_name(op), make);
    } else {
      KILN_ASSERT(false, "binary_compare: ", op_name(op), " is not a comparison");
    }
  });
}

}  // namespace kiln::cuda
