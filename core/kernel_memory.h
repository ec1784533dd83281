// Memory for kernels: the one header of core a backend kernel needs besides the Backend
// interface and Tensor itself. Kernels never call back up into the op layer (core/ops/):
// a temporary, a contiguous copy target or a scratch workspace comes from here.
//
//   const Tensor packed = allocate_tensor(x.sizes(), x.dtype(), x.device());
//   const Tensor scratch = allocate_workspace(bytes, out.device());   // UInt8 [bytes]
//
// Both draw from the device's allocator (on CUDA the caching allocator, whose blocks are
// stream-ordered: freeing one at the end of a call while the kernels that use it are still
// queued on the same stream is safe). Contents are uninitialised; nothing requires grad.
#pragma once

#include <cstdint>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "core/tensor.h"

namespace kiln {

// A contiguous tensor of `sizes` and `dtype` on `device`.
Tensor allocate_tensor(const std::vector<int64_t>& sizes, DType dtype, Device device);

// `bytes` bytes of scratch memory on `device`, as a UInt8 tensor of that many elements.
Tensor allocate_workspace(int64_t bytes, Device device);

}  // namespace kiln
