// Element offsets of strided operands from a linear index, for kernels over any layout.
//
// A kernel thread gets a linear index i into the (row-major) shape of an op's output and
// needs each operand's offset: split i into coordinates (i mod size, i div size, from the
// innermost dim outwards) and dot them with each operand's strides. Integer division is
// slow on GPUs (a ~20-instruction subroutine), but every divisor here is known on the
// host before the launch, so FastDivmod turns each division into a multiply-high, an add
// and a shift (Granlund & Montgomery, "Division by invariant integers using
// multiplication", PLDI'94): for a divisor d, let s = ceil(log2 d) and
//   m = floor(2^32 (2^s - d) / d) + 1   (fits in 32 bits);
// then for every n < 2^31,  n div d = (umulhi(n, m) + n) >> s.
// The index is 32-bit (launches are split so that it fits, Note [32-bit indexing] in
// elementwise_plan.h); offsets are 64-bit. This header is plain C++ with __host__
// __device__ functions, so the host tests check it exhaustively without a GPU.
#pragma once

#include <array>
#include <cstdint>

#include "core/half.h"  // KILN_HOST_DEVICE

namespace kiln::cuda {

class FastDivmod {
 public:
  FastDivmod() = default;
  // `divisor` >= 1 and < 2^31 (KILN_ASSERTed on the host by make_offset_calculator).
  explicit FastDivmod(uint32_t divisor) : divisor_(divisor) {
    while (shift_ < 32 && (uint64_t{1} << shift_) < divisor) ++shift_;
    const uint64_t magic = ((uint64_t{1} << 32) * ((uint64_t{1} << shift_) - divisor)) / divisor + 1;
    multiplier_ = static_cast<uint32_t>(magic);
  }

  KILN_HOST_DEVICE uint32_t divisor() const { return divisor_; }

  // n div d, for n < 2^31.
  KILN_HOST_DEVICE uint32_t div(uint32_t n) const {
#if defined(__CUDA_ARCH__)
    const uint32_t high = __umulhi(n, multiplier_);
#else
    const uint32_t high = static_cast<uint32_t>((static_cast<uint64_t>(n) * multiplier_) >> 32);
#endif
    return (high + n) >> shift_;
  }

  // Quotient and remainder together.
  KILN_HOST_DEVICE void divmod(uint32_t n, uint32_t& quotient, uint32_t& remainder) const {
    quotient = div(n);
    remainder = n - quotient * divisor_;
  }

 private:
  uint32_t divisor_ = 1;
  uint32_t multiplier_ = 0;
  uint32_t shift_ = 0;
};

// Dims a kernel can walk after coalescing (the CPU engine has the same limit).
inline constexpr int kMaxOffsetDims = 16;

// For kOperands operands of one shape: dims innermost first, each with its size (as a
// FastDivmod) and every operand's stride in elements. Passed to kernels by value.
template <int kOperands>
struct OffsetCalculator {
  int ndim = 0;
  FastDivmod sizes[kMaxOffsetDims];
  int64_t strides[kMaxOffsetDims][kOperands];

  // The offsets, in elements, of linear index `linear` (row-major over the shape).
  KILN_HOST_DEVICE std::array<int64_t, kOperands> get(uint32_t linear) const {
    std::array<int64_t, kOperands> offsets{};
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
    for (int d = 0; d < kMaxOffsetDims; ++d) {
      if (d == ndim) break;
      uint32_t quotient, coordinate;
      sizes[d].divmod(linear, quotient, coordinate);
      linear = quotient;
      for (int k = 0; k < kOperands; ++k) offsets[k] += static_cast<int64_t>(coordinate) * strides[d][k];
    }
    return offsets;
  }
};

}  // namespace kiln::cuda
