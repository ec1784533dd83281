// Launch planning of the CUDA index kernels (index.cu): plain host C++, tested on the host
// (tests/cuda/internal/test_index_plan.cpp).
//
// An index kernel walks one shape (the index's) over N operands, each with its own base
// address and strides. Two steps turn that into launches:
//   1. for_each_32bit_piece splits the walk into pieces of at most 2^31 - 1 elements, so a
//      kernel's linear index fits the 32-bit FastDivmod of offset_calculator.h: the
//      outermost dim of size > 1 is cut into chunks (each a piece whose base addresses
//      move by start * stride), or, when even one slice of it is too large, walked one
//      slice at a time with the same split applied to the remaining dims.
//   2. make_offset_calculator drops the size-1 dims and merges neighbouring dims that
//      every operand walks contiguously (outer stride == inner stride * inner size), so a
//      contiguous operand costs one divmod per element whatever its rank.
// A piece is never larger than 2^31 - 1 elements, so every merged size fits FastDivmod.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <vector>

#include "core/error.h"
#include "kernels/cuda/offset_calculator.h"

namespace kiln::cuda::index_plan {

inline constexpr int64_t kMaxPieceElements = std::numeric_limits<int32_t>::max();

// N operands walked over `sizes` (row-major): base address, strides in elements, and the
// element size in bytes (to move a base address by whole elements).
template <int N>
struct StridedOperands {
  std::vector<int64_t> sizes;
  std::array<char*, N> data{};
  std::array<std::vector<int64_t>, N> strides;
  std::array<int64_t, N> element_sizes{};

  int64_t numel() const {
    int64_t n = 1;
    for (int64_t s : sizes) n *= s;
    return n;
  }
};

// Calls launch(piece) for consecutive pieces of `ops` of at most kMaxPieceElements
// elements; together they cover every element exactly once. `limit` is for the tests.
template <int N, typename Launch>
void for_each_32bit_piece(const StridedOperands<N>& ops, const Launch& launch,
                          int64_t limit = kMaxPieceElements) {
  const int64_t numel = ops.numel();
  if (numel == 0) return;
  if (numel <= limit) {
    launch(ops);
    return;
  }
  size_t d = 0;
  while (ops.sizes[d] == 1) ++d;  // exists: numel > limit >= 1
  const int64_t size = ops.sizes[d];
  const int64_t inner = numel / size;
  const int64_t chunk = inner <= limit ? limit / inner : 1;
  for (int64_t start = 0; start < size; start += chunk) {
    StridedOperands<N> piece = ops;
    piece.sizes[d] = std::min(chunk, size - start);
    for (int k = 0; k < N; ++k) piece.data[k] += start * ops.strides[k][d] * ops.element_sizes[k];
    for_each_32bit_piece(piece, launch, limit);  // recurses only when chunk == 1 is too big
  }
}

// The offset calculator of a piece (numel <= kMaxPieceElements), dims coalesced.
template <int N>
OffsetCalculator<N> make_offset_calculator(const StridedOperands<N>& ops, const char* op) {
  KILN_ASSERT(ops.numel() <= kMaxPieceElements, op, ": a piece of ", ops.numel(), " elements");
  std::vector<int64_t> sizes;                  // innermost first
  std::vector<std::array<int64_t, N>> strides;  // likewise
  for (size_t d = ops.sizes.size(); d-- > 0;) {
    if (ops.sizes[d] == 1) continue;
    std::array<int64_t, N> s;
    for (int k = 0; k < N; ++k) s[k] = ops.strides[k][d];
    bool merges = !sizes.empty();
    for (int k = 0; merges && k < N; ++k) merges = s[k] == strides.back()[k] * sizes.back();
    if (merges) {
      sizes.back() *= ops.sizes[d];
    } else {
      sizes.push_back(ops.sizes[d]);
      strides.push_back(s);
    }
  }
  KILN_CHECK(sizes.size() <= static_cast<size_t>(kMaxOffsetDims), op, ": operands of shape ", ops.sizes,
             " need ", sizes.size(), " dims after merging contiguous ones; CUDA kernels walk at most ",
             kMaxOffsetDims);
  OffsetCalculator<N> calc;
  calc.ndim = static_cast<int>(sizes.size());
  for (size_t d = 0; d < sizes.size(); ++d) {
    calc.sizes[d] = FastDivmod(static_cast<uint32_t>(sizes[d]));
    for (int k = 0; k < N; ++k) calc.strides[d][k] = strides[d][k];
  }
  return calc;
}

}  // namespace kiln::cuda::index_plan
