// Copies between dtypes, devices and layouts: to, clone, contiguous, copy_.
//
// All are differentiable: the gradient of a conversion is converted back (to the input's
// dtype and device); the gradient of copy_ flows to the source (summed over broadcast
// dims) and is zero for the overwritten destination.
#pragma once

#include "core/tensor.h"

namespace kiln {

// Returns `t` itself when nothing changes and copy is false (as PyTorch's .to()).
Tensor to(const Tensor& t, Device device, DType dtype, bool non_blocking = false, bool copy = false);
Tensor clone(const Tensor& t);
Tensor contiguous(const Tensor& t);
// self = src (broadcast to self's shape, cast to self's dtype, from any device). In place.
Tensor& copy_(Tensor& self, const Tensor& src, bool non_blocking = false);

}  // namespace kiln
