// softmax and log_softmax along one dim: fused, numerically stable kernels (the row max
// is subtracted before exp) with fused backward kernels. Half-precision inputs compute in
// float32 inside the kernel and return their own dtype.
#pragma once

#include "core/tensor.h"

namespace kiln {

Tensor softmax(const Tensor& x, int64_t dim);
Tensor log_softmax(const Tensor& x, int64_t dim);

}  // namespace kiln
