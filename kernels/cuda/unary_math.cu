// The floating-only unary ops on CUDA (sqrt, rsqrt, exp, log, reciprocal, sigmoid, tanh,
// silu, gelu, gelu_tanh, elu, leaky_relu, softplus), in f32/f64/f16/bf16; f16 and bf16
// compute in float (Note [Opmath]). The functors are the CPU's (elementwise_functors.h)
// compiled for the device, so results differ from the CPU only by the device's
// transcendental functions (a few ulp). CudaBackend::unary (unary.cu) calls this table.
#include "kernels/cuda/elementwise.cuh"
#include "kernels/cuda/elementwise_families.h"

namespace kiln::cuda {

constinit const UnaryLaunchers kUnaryFloatingLaunchers = unary_launchers<ElementwiseFamily::UnaryFloating>();

}  // namespace kiln::cuda
