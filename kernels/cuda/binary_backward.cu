// The activations' backward functors on CUDA: grad_in = f(grad_out, saved), where saved
// is the forward output (relu, sigmoid, tanh) or input (silu, gelu, gelu_tanh, elu,
// leaky_relu, softplus, clamp), as BinaryOp documents. Floating dtypes only, f16/bf16 in
// float. These kernels overwrite grad_in (=); the autograd engine accumulates.
// CudaBackend::binary (binary.cu) routes here.
#include "kernels/cuda/elementwise.cuh"
#include "kernels/cuda/elementwise_families.h"
#include "kernels/elementwise_ops.h"

namespace kiln::cuda {

void binary_backward(BinaryOp op, const Tensor& grad_out, const Tensor& saved, const Tensor& grad_in,
                     const ElementwiseParams& params) {
  elementwise::dispatch_binary(op, params, [&]<DTypeSet kSet, BinaryOp kOp>(const auto& make) {
    if constexpr (elementwise::is_backward(kOp)) {
      run_binary<kSet>(grad_out, saved, grad_in, op_name(op), make);
    } else {
      KILN_ASSERT(false, "binary_backward: ", op_name(op), " is not a backward op");
    }
  });
}

}  // namespace kiln::cuda
