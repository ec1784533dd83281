// Index ops: gather, scatter_add, index_select. Indices are Int64 and bounds-checked
// (an index out of range is a kiln::Error naming the op, the index and the size).
//
// Gradients: gather's is a scatter_add of g; scatter_add's is g for self and a gather of
// g for src; index_select's is a scatter_add of g into zeros along dim.
#pragma once

#include "core/tensor.h"

namespace kiln {

// out[i][j][k] = x[index[i][j][k]][j][k] (dim 0), etc. index.dim() == x.dim(), and
// index.size(d) <= x.size(d) for d != dim.
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);
// A copy of self with src[i][j][k] added at self[index[i][j][k]][j][k] (dim 0), etc.
Tensor scatter_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src);
// x with dim `dim` restricted to the 1-d index.
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);

}  // namespace kiln
