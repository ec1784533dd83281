// Comparisons and logical ops on CUDA (eq, ne, lt, le, gt, ge, logical_and, logical_or):
// inputs of any dtype, a Bool output (one byte, 0 or 1). Half/BFloat16 compare as float,
// which is exact. CudaBackend::binary (binary.cu) calls this table.
#include "kernels/cuda/elementwise.cuh"
#include "kernels/cuda/elementwise_families.h"

namespace kiln::cuda {

constinit const BinaryLaunchers kBinaryCompareLaunchers = binary_launchers<ElementwiseFamily::BinaryCompare>();

}  // namespace kiln::cuda
