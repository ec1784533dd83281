// The activations' backward functors on CUDA: grad_in = f(grad_out, saved), where saved
// is the forward output (relu, sigmoid, tanh) or input (silu, gelu, gelu_tanh, elu,
// leaky_relu, softplus, clamp), as the op table says. Floating dtypes only, f16/bf16 in
// float. These kernels overwrite grad_in (=); the autograd engine accumulates.
// CudaBackend::binary (binary.cu) calls this table.
#include "kernels/cuda/elementwise.cuh"
#include "kernels/cuda/elementwise_families.h"

namespace kiln::cuda {

constinit const BinaryLaunchers kBinaryBackwardLaunchers = binary_launchers<ElementwiseFamily::BinaryBackward>();

}  // namespace kiln::cuda
