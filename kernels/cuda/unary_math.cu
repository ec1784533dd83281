// The floating-only unary ops on CUDA (sqrt, rsqrt, exp, log, reciprocal, sigmoid, tanh,
// silu, gelu, gelu_tanh, elu, leaky_relu, softplus), in f32/f64/f16/bf16; f16 and bf16
// compute in float (Note [Opmath]). The functors are the CPU's (elementwise_functors.h)
// compiled for the device, so results differ from the CPU only by the device's
// transcendental functions (a few ulp). CudaBackend::unary (unary.cu) routes here.
#include "kernels/cuda/elementwise.cuh"
#include "kernels/cuda/elementwise_families.h"
#include "kernels/elementwise_ops.h"

namespace kiln::cuda {

void unary_floating(UnaryOp op, const Tensor& in, const Tensor& out, const ElementwiseParams& params) {
  elementwise::dispatch_unary(op, params, [&]<DTypeSet kSet, UnaryOp>(const auto& make) {
    if constexpr (kSet.bits == kFloatingTypes.bits) {
      run_unary<kSet>(in, out, op_name(op), make);
    } else {
      KILN_ASSERT(false, "unary_floating: ", op_name(op), " is not a floating-only op");
    }
  });
}

}  // namespace kiln::cuda
