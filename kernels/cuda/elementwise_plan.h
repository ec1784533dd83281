// Host-side launch planning of the CUDA elementwise engine (elementwise.cuh): which
// kernel runs a coalesced StridedLoop, how it is split so that 32-bit indices suffice,
// and the offset calculator of the strided kernel. Plain C++, so the host tests
// (tests/cuda/internal/test_elementwise_plan.cpp) check it without a GPU.
//
// Note [32-bit indexing]: the strided kernel turns a linear index into coordinates with
// FastDivmod, which needs the index below 2^31; 32-bit index math is also what keeps
// the kernels' integer work cheap. A loop fits when its numel and every operand's extent
// (the distance, in elements, from its first to its last element, plus one) are at most
// 2^31 - 1. A loop that does not fit is split in two along its dim with the largest
// extent (the outermost one when tensors are contiguous), at a multiple of 64 elements
// when possible so each half keeps the vector path's alignment, and each half is split
// again until every piece fits; each piece is one launch. A 2^31 + 4097-byte tensor
// thus runs as two launches of about 1 GiB each.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "core/error.h"
#include "kernels/cuda/offset_calculator.h"
#include "kernels/strided_loop.h"

namespace kiln::cuda {

// Bytes per element of each operand (operand 0 is the output).
using ElementSizes = std::array<int64_t, kMaxOperands>;

inline constexpr int64_t kMaxIndex32 = (int64_t{1} << 31) - 1;

// Elements per 16-byte vector for operands whose widest element has `max_element_size`
// bytes: 16 for bytes, 4 for float, 2 for double.
constexpr int vector_width(int64_t max_element_size) {
  return max_element_size >= 16 ? 1 : static_cast<int>(16 / max_element_size);
}

enum class ElementwisePath { Vectorized, Strided };

// Whether `loop` can be indexed with 32 bits (Note [32-bit indexing]).
bool fits_32bit_indexing(const StridedLoop& loop, const ElementSizes& element_sizes);

// `loop` split into pieces that each fit 32-bit indexing; {loop} itself when it fits.
std::vector<StridedLoop> split_for_32bit_indexing(const StridedLoop& loop, const ElementSizes& element_sizes);

// Vectorized when every operand is contiguous (the loop coalesced to at most one dim of
// unit element strides) and each operand's pointer is aligned to its vector
// (vec * element size bytes); otherwise Strided.
ElementwisePath choose_path(const StridedLoop& loop, const ElementSizes& element_sizes, int vec);

// The strided kernel's calculator: dims innermost first, strides in elements.
template <int kOperands>
OffsetCalculator<kOperands> make_offset_calculator(const StridedLoop& loop, const ElementSizes& element_sizes) {
  OffsetCalculator<kOperands> calc;
  KILN_ASSERT(loop.ndim <= kMaxOffsetDims && loop.noperands == kOperands, "elementwise: bad strided loop");
  calc.ndim = loop.ndim;
  for (int d = 0; d < loop.ndim; ++d) {
    const int outer_first = loop.ndim - 1 - d;
    KILN_ASSERT(loop.sizes[outer_first] >= 1 && loop.sizes[outer_first] <= kMaxIndex32,
                "elementwise: dim of size ", loop.sizes[outer_first], " in a 32-bit launch");
    calc.sizes[d] = FastDivmod(static_cast<uint32_t>(loop.sizes[outer_first]));
    for (int k = 0; k < kOperands; ++k) calc.strides[d][k] = loop.byte_strides[k][outer_first] / element_sizes[k];
  }
  return calc;
}

}  // namespace kiln::cuda
