// Shape ops that make new tensors from several: cat, stack, meshgrid, and the splits
// (split, chunk: views, one narrow each).
#pragma once

#include <string>
#include <vector>

#include "core/tensor.h"

namespace kiln {

// Joins along an existing dim; dtypes promote; 1-d empty tensors are skipped (as PyTorch).
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim = 0);
// Joins along a new dim.
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim = 0);
// Pieces of split_size (the last may be smaller).
std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim = 0);
// Pieces of the given sizes, which must add up to the dim's size.
std::vector<Tensor> split_with_sizes(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim = 0);
// `chunks` pieces of ceil(size / chunks) (fewer if the dim is small).
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim = 0);
// Coordinate grids from 1-d tensors; indexing "ij" (matrix) or "xy" (Cartesian).
std::vector<Tensor> meshgrid(const std::vector<Tensor>& tensors, const std::string& indexing = "ij");

}  // namespace kiln
