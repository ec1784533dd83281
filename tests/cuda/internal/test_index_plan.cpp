// The launch planning of the CUDA index kernels (kernels/cuda/index_plan.h) on the host:
// the 32-bit pieces cover every element exactly once, and the coalesced offset
// calculator gives every operand's offset as the naive row-major walk does.
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <vector>

#include "kernels/cuda/index_plan.h"

namespace kiln::cuda::index_plan {
namespace {

int64_t address(const char* p) { return static_cast<int64_t>(reinterpret_cast<intptr_t>(p)); }
char* fake_pointer(intptr_t address) { return reinterpret_cast<char*>(address); }

// Byte offsets of each element of `ops`, by a naive row-major walk.
std::vector<std::array<int64_t, 2>> naive_offsets(const StridedOperands<2>& ops) {
  std::vector<std::array<int64_t, 2>> result;
  const int64_t n = ops.numel();
  for (int64_t linear = 0; linear < n; ++linear) {
    std::array<int64_t, 2> offset = {address(ops.data[0]), address(ops.data[1])};
    int64_t rest = linear;
    for (size_t d = ops.sizes.size(); d-- > 0;) {
      const int64_t coordinate = rest % ops.sizes[d];
      rest /= ops.sizes[d];
      for (int k = 0; k < 2; ++k) offset[k] += coordinate * ops.strides[k][d] * ops.element_sizes[k];
    }
    result.push_back(offset);
  }
  return result;
}

// The byte offsets the kernels compute: each piece's calculator from its base addresses.
std::vector<std::array<int64_t, 2>> planned_offsets(const StridedOperands<2>& ops, int64_t limit) {
  std::vector<std::array<int64_t, 2>> result;
  for_each_32bit_piece(
      ops,
      [&](const StridedOperands<2>& piece) {
        EXPECT_LE(piece.numel(), limit);
        const OffsetCalculator<2> calc = make_offset_calculator(piece, "test");
        for (int64_t i = 0; i < piece.numel(); ++i) {
          const auto o = calc.get(static_cast<uint32_t>(i));
          std::array<int64_t, 2> offset;
          for (int k = 0; k < 2; ++k) {
            offset[k] = address(piece.data[k]) + o[k] * piece.element_sizes[k];
          }
          result.push_back(offset);
        }
      },
      limit);
  return result;
}

StridedOperands<2> operands(std::vector<int64_t> sizes, std::vector<int64_t> a, std::vector<int64_t> b) {
  StridedOperands<2> ops;
  ops.sizes = std::move(sizes);
  ops.data = {fake_pointer(4096), fake_pointer(65536)};
  ops.strides = {std::move(a), std::move(b)};
  ops.element_sizes = {4, 8};
  return ops;
}

TEST(IndexPlan, OnePieceWhenSmallAndOffsetsMatchTheNaiveWalk) {
  const std::vector<StridedOperands<2>> cases = {
      operands({2, 3, 4}, {12, 4, 1}, {12, 4, 1}),   // contiguous: merges to one dim
      operands({2, 3, 4}, {1, 2, 6}, {12, 0, 1}),    // transposed, and a stride-0 dim
      operands({5, 1, 7}, {14, 99, 2}, {0, 5, 0}),   // size-1 dim, gaps, broadcast
      operands({3, 4}, {0, 0}, {0, 0}),               // everything broadcast
      operands({7}, {-1}, {3}),                       // a negative stride (a flipped view)
  };
  for (const auto& ops : cases) {
    int pieces = 0;
    for_each_32bit_piece(ops, [&](const StridedOperands<2>&) { ++pieces; });
    EXPECT_EQ(pieces, 1);
    EXPECT_EQ(planned_offsets(ops, kMaxPieceElements), naive_offsets(ops));
  }
}

TEST(IndexPlan, ContiguousDimsMergeAndBroadcastOnesStayApart) {
  EXPECT_EQ(make_offset_calculator(operands({2, 3, 4}, {12, 4, 1}, {12, 4, 1}), "test").ndim, 1);
  EXPECT_EQ(make_offset_calculator(operands({2, 3, 4}, {12, 4, 1}, {4, 0, 1}), "test").ndim, 3);
  EXPECT_EQ(make_offset_calculator(operands({2, 1, 4}, {4, 77, 1}, {4, 5, 1}), "test").ndim, 1);
}

// With a tiny limit standing in for 2^31, the split must still cover each element once,
// in order: chunks of the outer dim, and slices when one outer slice is too big.
TEST(IndexPlan, PiecesCoverEveryElementOnceUnderTheLimit) {
  const StridedOperands<2> ops = operands({5, 3, 7}, {1, 5, 15}, {21, 7, 1});
  for (int64_t limit : {1, 2, 5, 6, 7, 20, 21, 22, 64, 104, 105}) {
    EXPECT_EQ(planned_offsets(ops, limit), naive_offsets(ops)) << "limit " << limit;
  }
  const StridedOperands<2> leading_ones = operands({1, 1, 9, 4}, {0, 3, 4, 1}, {1, 1, 0, 2});
  for (int64_t limit : {1, 3, 4, 5, 35}) {
    EXPECT_EQ(planned_offsets(leading_ones, limit), naive_offsets(leading_ones)) << "limit " << limit;
  }
}

TEST(IndexPlan, EmptyShapesLaunchNothing) {
  int pieces = 0;
  for_each_32bit_piece(operands({3, 0, 2}, {0, 2, 1}, {0, 2, 1}), [&](const StridedOperands<2>&) { ++pieces; });
  EXPECT_EQ(pieces, 0);
}

// A real 2^31-element walk (never allocated: only the plan is made).
TEST(IndexPlan, ShapesBeyondTwoToTheThirtyOneAreSplit) {
  const StridedOperands<2> ops = operands({3, int64_t{1} << 30}, {int64_t{1} << 30, 1}, {0, 1});
  std::vector<int64_t> piece_sizes;
  for_each_32bit_piece(ops, [&](const StridedOperands<2>& piece) {
    EXPECT_LE(piece.numel(), kMaxPieceElements);
    piece_sizes.push_back(piece.numel());
    const OffsetCalculator<2> calc = make_offset_calculator(piece, "test");
    EXPECT_EQ(calc.get(static_cast<uint32_t>(piece.numel() - 1))[0], piece.numel() - 1);
  });
  int64_t total = 0;
  for (int64_t s : piece_sizes) total += s;
  EXPECT_EQ(total, 3 * (int64_t{1} << 30));
  EXPECT_EQ(piece_sizes.size(), 3u);  // a chunk of one row each: two rows exceed 2^31 - 1
}

}  // namespace
}  // namespace kiln::cuda::index_plan
