// FastDivmod and OffsetCalculator (kernels/cuda/offset_calculator.h) on the host: the same
// code runs in the kernels, so checking it here checks the kernels' index math.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>

#include "kernels/cuda/offset_calculator.h"

namespace kiln::cuda {
namespace {

// Every divisor up to 2^12 against every dividend up to 2^14, and the edges.
TEST(FastDivmod, MatchesIntegerDivisionForSmallOperands) {
  for (uint32_t d = 1; d <= 4096; ++d) {
    const FastDivmod fast(d);
    for (uint32_t n = 0; n < (1u << 14); ++n) {
      uint32_t q, r;
      fast.divmod(n, q, r);
      ASSERT_EQ(q, n / d) << n << " / " << d;
      ASSERT_EQ(r, n % d) << n << " % " << d;
    }
  }
}

// Random and boundary operands over the whole supported range (n < 2^31, d < 2^31).
TEST(FastDivmod, MatchesIntegerDivisionOverTheWholeRange) {
  std::mt19937_64 rng(7);
  std::vector<uint32_t> divisors = {1, 2, 3, 7, 641, 65535, 65536, 65537, (1u << 30) - 1, 1u << 30,
                                    (1u << 30) + 1, (1u << 31) - 1};
  for (int i = 0; i < 2000; ++i) divisors.push_back(1 + static_cast<uint32_t>(rng() % ((1u << 31) - 1)));
  for (uint32_t d : divisors) {
    const FastDivmod fast(d);
    const uint32_t edges[] = {0, 1, d - 1, d, d + 1, 2 * d - 1, (1u << 31) - 1, (1u << 31) - 2};
    for (uint32_t n : edges) {
      if (n >= (1u << 31)) continue;
      EXPECT_EQ(fast.div(n), n / d) << n << " / " << d;
    }
    for (int j = 0; j < 200; ++j) {
      const uint32_t n = static_cast<uint32_t>(rng() % (1u << 31));
      ASSERT_EQ(fast.div(n), n / d) << n << " / " << d;
    }
  }
}

// A [2, 3, 4] shape, operand 0 contiguous, operand 1 its transpose over the outer two dims
// with an extra row pitch: offsets are the dot products of coordinates and strides.
TEST(OffsetCalculator, DotsCoordinatesWithEachOperandsStrides) {
  OffsetCalculator<2> calc;
  calc.ndim = 3;
  const uint32_t sizes[3] = {4, 3, 2};              // innermost first
  const int64_t strides[3][2] = {{1, 1}, {4, 10}, {12, 5}};
  for (int d = 0; d < 3; ++d) {
    calc.sizes[d] = FastDivmod(sizes[d]);
    calc.strides[d][0] = strides[d][0];
    calc.strides[d][1] = strides[d][1];
  }
  uint32_t linear = 0;
  for (int64_t i = 0; i < 2; ++i) {
    for (int64_t j = 0; j < 3; ++j) {
      for (int64_t k = 0; k < 4; ++k, ++linear) {
        const auto offsets = calc.get(linear);
        EXPECT_EQ(offsets[0], i * 12 + j * 4 + k);
        EXPECT_EQ(offsets[1], i * 5 + j * 10 + k);
      }
    }
  }
}

}  // namespace
}  // namespace kiln::cuda
