// Index ops: gather, scatter_add, index_select, with PyTorch's validation rules.
//
// Indices are Int64 tensors on the input's device, and every index value must lie in
// [0, size) of the indexed dim: negative indices are not wrapped (as PyTorch); an index
// out of range is a kiln::Error naming the op, the index and the dim's size. `dim` itself
// may be negative. A 0-d tensor counts as 1-d of size 1 in the shape rules (as PyTorch).
#pragma once

#include "core/tensor.h"

namespace kiln {

// out[i][j][k] = x[index[i][j][k]][j][k] (dim 0), x[i][index[i][j][k]][k] (dim 1), ...
// index has x's rank, index.size(d) <= x.size(d) for d != dim; out has index's shape and
// x's dtype. Gradient (x): zeros like x with g scatter-added at index.
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);
// Out of place: a copy of self with src[i][j][k] added to out[index[i][j][k]][j][k]
// (dim 0), ...; repeated indices accumulate. index, self and src have one rank,
// index.size(d) <= src.size(d) for every d and <= self.size(d) for d != dim (only the
// leading index-shaped block of src is used); src has self's dtype (any numeric dtype).
// Gradient: self gets g; src gets gather(g, dim, index) (zero where src was unused).
Tensor scatter_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src);
// x with dim `dim` restricted to the entries picked by the 0-d or 1-d index, in order
// (repeats allowed): out.size(dim) == index.numel(). x must be at least 1-d.
// Gradient (x): zeros like x with g's slices added back at their indices.
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);

}  // namespace kiln
