// Launch planning of the CUDA elementwise engine: 32-bit splitting and path choice
// (see elementwise_plan.h and Note [32-bit indexing] there).
#include "kernels/cuda/elementwise_plan.h"

#include <algorithm>
#include <cstdlib>

#include "core/error.h"

namespace kiln::cuda {
namespace {

// Distance in elements from operand k's first element to its last, plus one.
int64_t extent_in_elements(const StridedLoop& loop, int k, const ElementSizes& element_sizes) {
  int64_t extent = 1;
  for (int d = 0; d < loop.ndim; ++d) extent += (loop.sizes[d] - 1) * (std::abs(loop.byte_strides[k][d]) / element_sizes[k]);
  return extent;
}

// The dim to split: the one whose extent (size times the largest stride) is largest.
int dim_to_split(const StridedLoop& loop, const ElementSizes& element_sizes) {
  int best = -1;
  int64_t best_extent = -1;
  for (int d = 0; d < loop.ndim; ++d) {
    if (loop.sizes[d] < 2) continue;
    int64_t stride = 1;
    for (int k = 0; k < loop.noperands; ++k) stride = std::max(stride, std::abs(loop.byte_strides[k][d]) / element_sizes[k]);
    const int64_t extent = loop.sizes[d] * stride;
    if (extent > best_extent) best = d, best_extent = extent;
  }
  return best;
}

void split_into(const StridedLoop& loop, const ElementSizes& element_sizes, std::vector<StridedLoop>& pieces) {
  if (fits_32bit_indexing(loop, element_sizes)) {
    if (loop.numel > 0) pieces.push_back(loop);
    return;
  }
  const int d = dim_to_split(loop, element_sizes);
  KILN_ASSERT(d >= 0, "elementwise: cannot split a loop of ", loop.numel, " elements");
  const int64_t size = loop.sizes[d];
  int64_t first = size / 2;
  if (first >= 64) first -= first % 64;  // keep the second half 16-byte aligned
  StridedLoop low = loop, high = loop;
  low.sizes[d] = first;
  high.sizes[d] = size - first;
  low.numel = loop.numel / size * first;
  high.numel = loop.numel / size * (size - first);
  for (int k = 0; k < loop.noperands; ++k) high.data[k] += first * loop.byte_strides[k][d];
  split_into(low, element_sizes, pieces);
  split_into(high, element_sizes, pieces);
}

}  // namespace

bool fits_32bit_indexing(const StridedLoop& loop, const ElementSizes& element_sizes) {
  if (loop.numel > kMaxIndex32) return false;
  for (int k = 0; k < loop.noperands; ++k)
    if (extent_in_elements(loop, k, element_sizes) > kMaxIndex32) return false;
  return true;
}

std::vector<StridedLoop> split_for_32bit_indexing(const StridedLoop& loop, const ElementSizes& element_sizes) {
  std::vector<StridedLoop> pieces;
  split_into(loop, element_sizes, pieces);
  return pieces;
}

ElementwisePath choose_path(const StridedLoop& loop, const ElementSizes& element_sizes, int vec) {
  if (loop.ndim > 1) return ElementwisePath::Strided;
  for (int k = 0; k < loop.noperands; ++k) {
    if (loop.ndim == 1 && loop.byte_strides[k][0] != element_sizes[k]) return ElementwisePath::Strided;
    const auto address = reinterpret_cast<uintptr_t>(loop.data[k]);
    if (address % static_cast<uintptr_t>(vec * element_sizes[k]) != 0) return ElementwisePath::Strided;
  }
  return ElementwisePath::Vectorized;
}

}  // namespace kiln::cuda
