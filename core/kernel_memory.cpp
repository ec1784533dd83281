// Memory for kernels (core/kernel_memory.h): the factories' own allocation path, so that
// size checks and allocator choice are written once (core/ops/factory.cpp).
#include "core/kernel_memory.h"

#include "core/ops/factory.h"

namespace kiln {

Tensor allocate_tensor(const std::vector<int64_t>& sizes, DType dtype, Device device) {
  return empty(sizes, {.dtype = dtype, .device = device});
}

Tensor allocate_workspace(int64_t bytes, Device device) {
  return empty({bytes}, {.dtype = DType::UInt8, .device = device});
}

}  // namespace kiln
