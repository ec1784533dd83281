// Launch planning of the CUDA elementwise engine (kernels/cuda/elementwise_plan.h) on the
// host: coalescing feeds the right path, misaligned or strided operands leave the vector
// path, and loops too large for 32-bit indices split into pieces that each fit and that
// together cover every element exactly once (Note [32-bit indexing]). Loops are built by
// hand with fake pointers, so sizes past 2^31 cost no memory.
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <set>
#include <vector>

#include "core/ops.h"
#include "kernels/cuda/elementwise_plan.h"

namespace kiln::cuda {
namespace {

char* fake_pointer(uintptr_t address) { return reinterpret_cast<char*>(address); }

// A one-operand-per-entry loop over `sizes` (outermost first) with byte strides.
StridedLoop make_loop(const std::vector<int64_t>& sizes, const std::vector<std::vector<int64_t>>& byte_strides,
                      const std::vector<uintptr_t>& addresses) {
  StridedLoop loop;
  loop.ndim = static_cast<int>(sizes.size());
  loop.noperands = static_cast<int>(byte_strides.size());
  loop.numel = 1;
  for (int d = 0; d < loop.ndim; ++d) {
    loop.sizes[d] = sizes[d];
    loop.numel *= sizes[d];
  }
  for (int k = 0; k < loop.noperands; ++k) {
    for (int d = 0; d < loop.ndim; ++d) loop.byte_strides[k][d] = byte_strides[k][d];
    loop.data[k] = fake_pointer(addresses[k]);
  }
  return loop;
}

const ElementSizes kFloats{4, 4, 4, 4};
const ElementSizes kBytes{1, 1, 1, 1};

TEST(ElementwisePlan, VectorWidthIsSixteenBytesOfTheWidestOperand) {
  EXPECT_EQ(vector_width(1), 16);
  EXPECT_EQ(vector_width(2), 8);
  EXPECT_EQ(vector_width(4), 4);
  EXPECT_EQ(vector_width(8), 2);
}

TEST(ElementwisePlan, ContiguousTensorsCoalesceToTheVectorPath) {
  const Tensor a = zeros({4, 5, 6}), b = zeros({4, 5, 6}), out = zeros({4, 5, 6});
  const StridedLoop loop = make_strided_loop({&out, &a, &b});
  EXPECT_EQ(loop.ndim, 1);
  EXPECT_EQ(loop.numel, 120);
  // The CPU allocator aligns to at least 16 bytes.
  EXPECT_EQ(choose_path(loop, kFloats, 4), ElementwisePath::Vectorized);
}

TEST(ElementwisePlan, TransposedOrBroadcastOperandsTakeTheStridedPath) {
  const Tensor a = zeros({8, 16}), out = zeros({16, 8});
  const Tensor at = a.t();
  EXPECT_EQ(choose_path(make_strided_loop({&out, &at}), kFloats, 4), ElementwisePath::Strided);
  const Tensor row = zeros({1, 8}).expand({16, 8});
  const StridedLoop broadcast = make_strided_loop({&out, &row});
  EXPECT_EQ(broadcast.ndim, 2);
  EXPECT_EQ(broadcast.byte_strides[1][0], 0);
  EXPECT_EQ(choose_path(broadcast, kFloats, 4), ElementwisePath::Strided);
}

TEST(ElementwisePlan, MisalignedPointerLeavesTheVectorPath) {
  const StridedLoop aligned = make_loop({1000}, {{4}, {4}}, {4096, 8192});
  EXPECT_EQ(choose_path(aligned, kFloats, 4), ElementwisePath::Vectorized);
  const StridedLoop misaligned = make_loop({1000}, {{4}, {4}}, {4096, 8192 + 4});
  EXPECT_EQ(choose_path(misaligned, kFloats, 4), ElementwisePath::Strided);
  // A Bool output next to float inputs needs only 4-byte alignment for its 4 elements.
  const StridedLoop mixed = make_loop({1000}, {{1}, {4}}, {4100, 8192});
  EXPECT_EQ(choose_path(mixed, ElementSizes{1, 4, 0, 0}, 4), ElementwisePath::Vectorized);
}

TEST(ElementwisePlan, OffsetCalculatorIsInnermostFirstInElements) {
  const StridedLoop loop = make_loop({3, 5}, {{20, 4}, {4, 12}}, {0, 0});
  const auto calc = make_offset_calculator<2>(loop, kFloats);
  ASSERT_EQ(calc.ndim, 2);
  EXPECT_EQ(calc.sizes[0].divisor(), 5u);
  EXPECT_EQ(calc.sizes[1].divisor(), 3u);
  // Linear index 7 = (row 1, col 2).
  const auto offsets = calc.get(7);
  EXPECT_EQ(offsets[0], 1 * 5 + 2 * 1);
  EXPECT_EQ(offsets[1], 1 * 1 + 2 * 3);
}

TEST(ElementwisePlan, SmallLoopsAreNotSplit) {
  const StridedLoop loop = make_loop({1000, 1000}, {{4000, 4}, {4000, 4}}, {0, 0});
  EXPECT_TRUE(fits_32bit_indexing(loop, kFloats));
  EXPECT_EQ(split_for_32bit_indexing(loop, kFloats).size(), 1u);
  const StridedLoop edge = make_loop({kMaxIndex32}, {{1}}, {0});
  EXPECT_TRUE(fits_32bit_indexing(edge, kBytes));
}

// Every element of every operand is covered exactly once by the pieces, each piece fits.
void expect_exact_cover(const StridedLoop& loop, const ElementSizes& sizes, size_t min_pieces) {
  const std::vector<StridedLoop> pieces = split_for_32bit_indexing(loop, sizes);
  EXPECT_GE(pieces.size(), min_pieces);
  int64_t total = 0;
  for (const StridedLoop& piece : pieces) {
    EXPECT_TRUE(fits_32bit_indexing(piece, sizes));
    EXPECT_GT(piece.numel, 0);
    total += piece.numel;
  }
  EXPECT_EQ(total, loop.numel);
  // Pieces tile each dim's range: check the output's start offsets are distinct and that
  // the sum of the pieces' numel matches, and for 1-d loops that the ranges abut.
  if (loop.ndim == 1) {
    std::map<uintptr_t, int64_t> ranges;
    for (const StridedLoop& piece : pieces) ranges[reinterpret_cast<uintptr_t>(piece.data[0])] = piece.sizes[0];
    uintptr_t next = reinterpret_cast<uintptr_t>(loop.data[0]);
    for (const auto& [start, count] : ranges) {
      EXPECT_EQ(start, next);
      next = start + static_cast<uintptr_t>(count * loop.byte_strides[0][0]);
    }
  }
}

TEST(ElementwisePlan, HugeContiguousLoopSplitsIntoAlignedHalves) {
  const int64_t n = (int64_t{1} << 31) + 4097;
  const StridedLoop loop = make_loop({n}, {{1}, {1}}, {1 << 20, 1 << 22});
  EXPECT_FALSE(fits_32bit_indexing(loop, kBytes));
  const std::vector<StridedLoop> pieces = split_for_32bit_indexing(loop, kBytes);
  ASSERT_EQ(pieces.size(), 2u);
  // Split at a multiple of 64 elements: both halves keep the vector path.
  EXPECT_EQ(pieces[0].sizes[0] % 64, 0);
  for (const StridedLoop& piece : pieces) EXPECT_EQ(choose_path(piece, kBytes, 16), ElementwisePath::Vectorized);
  expect_exact_cover(loop, kBytes, 2);
  const StridedLoop huge = make_loop({int64_t{5} << 31}, {{2}}, {0});
  expect_exact_cover(huge, ElementSizes{2, 0, 0, 0}, 5);
}

TEST(ElementwisePlan, HugeMultiDimLoopSplitsAlongTheLargestExtent) {
  // [2^12, 2^20] contiguous output, and an input broadcast along the outer dim.
  const StridedLoop loop = make_loop({1 << 12, 1 << 20}, {{4 << 20, 4}, {0, 4}}, {0, 0});
  const std::vector<StridedLoop> pieces = split_for_32bit_indexing(loop, kFloats);
  ASSERT_GE(pieces.size(), 2u);
  for (const StridedLoop& piece : pieces) {
    EXPECT_EQ(piece.sizes[1], 1 << 20) << "the outer dim is the one split";
    EXPECT_EQ(piece.data[1], loop.data[1]) << "the broadcast input does not move";
  }
  expect_exact_cover(loop, kFloats, 2);
}

// Each element of `loop` as the tuple of its operands' addresses (row-major walk); for
// loops of few elements, however far apart.
std::multiset<std::vector<uintptr_t>> element_tuples(const StridedLoop& loop) {
  std::multiset<std::vector<uintptr_t>> tuples;
  for (int64_t linear = 0; linear < loop.numel; ++linear) {
    std::vector<uintptr_t> tuple(static_cast<size_t>(loop.noperands));
    int64_t rest = linear;
    for (int d = loop.ndim - 1; d >= 0; --d) {
      const int64_t coordinate = rest % loop.sizes[d];
      rest /= loop.sizes[d];
      for (int k = 0; k < loop.noperands; ++k) tuple[k] += static_cast<uintptr_t>(coordinate * loop.byte_strides[k][d]);
    }
    for (int k = 0; k < loop.noperands; ++k) tuple[k] += reinterpret_cast<uintptr_t>(loop.data[k]);
    tuples.insert(tuple);
  }
  return tuples;
}

// The pieces together hold exactly the loop's (output, inputs...) element tuples: each
// output element once, paired with the same input elements as in the whole loop.
void expect_exact_tuple_cover(const StridedLoop& loop, const ElementSizes& sizes, size_t min_pieces) {
  const std::vector<StridedLoop> pieces = split_for_32bit_indexing(loop, sizes);
  EXPECT_GE(pieces.size(), min_pieces);
  std::multiset<std::vector<uintptr_t>> covered;
  for (const StridedLoop& piece : pieces) {
    EXPECT_TRUE(fits_32bit_indexing(piece, sizes));
    const auto tuples = element_tuples(piece);
    covered.insert(tuples.begin(), tuples.end());
  }
  EXPECT_TRUE(covered == element_tuples(loop));
}

TEST(ElementwisePlan, SmallLoopWithAHugeStrideIsSplitToo) {
  // 4 elements spread over 3 * 2^30 elements: numel fits, the operand's extent does not.
  const StridedLoop loop = make_loop({4}, {{4}, {int64_t{4} << 30}}, {0, 0});
  EXPECT_FALSE(fits_32bit_indexing(loop, kFloats));
  expect_exact_cover(loop, kFloats, 2);
  expect_exact_tuple_cover(loop, kFloats, 2);
}

TEST(ElementwisePlan, SplitsOfMultiDimLoopsPairTheSameElements) {
  // [6, 5, 7]: the output's outer dim and the input's middle dim are 2^29 elements apart,
  // so both dims need splitting; a second input is broadcast along the middle dim.
  const int64_t far = int64_t{4} << 29;
  const StridedLoop loop =
      make_loop({6, 5, 7}, {{far, 28, 4}, {140, far, 20}, {28, 0, 4}}, {1 << 12, 1 << 16, 1 << 20});
  EXPECT_FALSE(fits_32bit_indexing(loop, kFloats));
  expect_exact_tuple_cover(loop, kFloats, 4);
  // Odd sizes and a size-1 dim, one float64 operand among floats.
  const StridedLoop odd = make_loop({3, 1, 129}, {{2 * far, 0, 4}, {8 * 129, 0, 8}}, {0, 1 << 20});
  EXPECT_FALSE(fits_32bit_indexing(odd, ElementSizes{4, 8, 0, 0}));
  expect_exact_tuple_cover(odd, ElementSizes{4, 8, 0, 0}, 2);
}

}  // namespace
}  // namespace kiln::cuda
