// Copies between dtypes, devices and layouts: to, clone, contiguous, copy_.
//
// All are differentiable: the gradient of a conversion is converted back (to the input's
// dtype and device); the gradient of copy_ flows to the source (summed over broadcast
// dims) and is zero for the overwritten destination.
#pragma once

#include "core/tensor.h"

namespace kiln {

// to() and clone() keep the layout (PyTorch's preserve_format: a channels-last or permuted
// tensor's copy has its strides; a strided one's is dense in its suggested format);
// contiguous() is row-major.
// Returns `t` itself when nothing changes and copy is false (as PyTorch's .to()).
Tensor to(const Tensor& t, Device device, DType dtype, bool non_blocking = false, bool copy = false);
Tensor clone(const Tensor& t);
Tensor contiguous(const Tensor& t);
// `t` laid out densely in `format` (Note [Memory formats] in core/memory_format.h): itself
// when it already is, else a copy with the format's strides, whose gradient is the
// incoming one as it is. A rank the format is not for is a kiln::Error.
Tensor contiguous(const Tensor& t, MemoryFormat format);
// A CPU tensor's values in pinned (page-locked) host memory, laid out contiguously;
// `t` itself when it is already pinned. Not differentiable through (a data-loading step).
// Needs a backend with pinned memory (CUDA): a clear error otherwise.
Tensor pin_memory(const Tensor& t);
// Whether `t`'s memory is pinned host memory (false for device tensors).
bool is_pinned(const Tensor& t);
// self = src (broadcast to self's shape, cast to self's dtype, from any device). In place.
Tensor& copy_(Tensor& self, const Tensor& src, bool non_blocking = false);

}  // namespace kiln
