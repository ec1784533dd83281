// Shape ops that make tensors from several or several from one: cat and stack (new
// tensors), split, split_with_sizes, chunk and meshgrid (views of their input).
//
// cat is a primitive with its own backward; the others are composed from views and cat,
// and take their gradients from them (see shape.cpp).
#pragma once

#include <string>
#include <vector>

#include "core/tensor.h"

namespace kiln {

// Joins tensors along the existing dim `dim` (may be negative). All must be on one device
// and have equal sizes except along dim; the result's dtype promotes over all inputs
// (int32 with float16 -> float16). As in PyTorch, 1-d tensors of shape [0] are skipped
// whatever the others' rank. Gradient: each input gets its slice of g, in its own dtype.
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim = 0);
// Joins equally shaped tensors along a new dim `dim` (in [-(rank+1), rank]).
// Gradient: through unsqueeze and cat.
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim = 0);
// Views of consecutive pieces of split_size along dim; the last may be smaller. An empty
// dim gives one empty piece. Gradient: through narrow.
std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim = 0);
// Views of consecutive pieces of the given sizes, which must add up to the dim's size.
std::vector<Tensor> split_with_sizes(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim = 0);
// torch.chunk: views of ceil(size / chunks) elements along dim, the last possibly smaller,
// so there may be fewer than `chunks` pieces (7 in 4 chunks -> 2, 2, 2, 1; 6 in 4 -> 2, 2, 2).
// An empty dim gives `chunks` empty pieces.
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim = 0);
// Coordinate grids from N 0-d or 1-d tensors (same dtype and device). With "ij" (matrix)
// indexing every output has shape [n0, n1, ...] and output i varies along dim i; "xy"
// (Cartesian) swaps the first two dims: shape [n1, n0, n2, ...]. Outputs are expanded
// views (stride 0), so copy them before writing. Gradient: through expand and reshape.
std::vector<Tensor> meshgrid(const std::vector<Tensor>& tensors, const std::string& indexing = "ij");

}  // namespace kiln
