// Views: tensors that share their input's storage and differ in sizes/strides/offset.
//
// Each is differentiable; its backward maps the gradient of the view back to the shape
// of the input (reshape back, inverse permutation, sum over expanded dims, or scatter
// into zeros for narrow/slice/select). Views share the version counter of their base,
// so an in-place change through a view is seen by autograd's saved-tensor checks.
#pragma once

#include <optional>
#include <vector>

#include "core/tensor.h"

namespace kiln {

// One size may be -1 (inferred). view needs strides compatible with the new shape.
Tensor view(const Tensor& t, Dims sizes);
// A view when the strides allow it, else a contiguous copy.
Tensor reshape(const Tensor& t, Dims sizes);
// For an op's own result: the contiguous `t` with `sizes` of as many elements, with no
// checks beyond an internal assert and no autograd record (`t` is in no graph yet): the
// keepdim-form view a reduction kernel writes through, at a fraction of view()'s cost.
Tensor contiguous_alias(const Tensor& t, Dims sizes);
Tensor permute(const Tensor& t, const Dims& dims);
Tensor transpose(const Tensor& t, int64_t dim0, int64_t dim1);
Tensor narrow(const Tensor& t, int64_t dim, int64_t start, int64_t length);
// Python's t[start:end:step] along dim; start/end may be negative or out of range (clamped).
Tensor slice(const Tensor& t, int64_t dim, std::optional<int64_t> start, std::optional<int64_t> end,
             int64_t step = 1);
Tensor select(const Tensor& t, int64_t dim, int64_t index);
// -1 keeps a size; new leading dims may be added; size-1 dims broadcast (stride 0).
Tensor expand(const Tensor& t, const Dims& sizes);
Tensor squeeze(const Tensor& t);
Tensor squeeze(const Tensor& t, int64_t dim);
Tensor unsqueeze(const Tensor& t, int64_t dim);
Tensor flatten(const Tensor& t, int64_t start_dim = 0, int64_t end_dim = -1);
Tensor as_strided(const Tensor& t, const Dims& sizes,
                  const Dims& strides, int64_t storage_offset);

// Broadcast shape of two shapes (NumPy rules), naming `op` on mismatch.
Dims broadcast_shapes(const Dims& a, const Dims& b,
                                      const char* op);
// Sums `grad` over broadcast dims so it has `sizes` (the backward of broadcasting).
Tensor sum_to(const Tensor& grad, const Dims& sizes);

}  // namespace kiln
