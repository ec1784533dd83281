// Integer arithmetic that wraps, written once for both backends' functors and reductions.
//
// Note [Integer overflow wraps]: integer add, sub, mul, neg, abs, square, pow and sums
// wrap around modulo 2^bits, as PyTorch's and numpy's do (INT64_MAX + 1 == INT64_MIN on
// every device). C++ leaves signed overflow undefined (a compiler may assume it never
// happens, and UBSan reports it), so these compute in an unsigned type at least as wide as
// `unsigned int` (narrower ones would be promoted back to signed int) where wrapping is
// defined, and convert back, which C++20 defines as modulo 2^bits. Floating types use the
// plain operators; bool never reaches here (the numeric ops exclude it).
#pragma once

#include <type_traits>

#include "core/half.h"  // KILN_HOST_DEVICE

namespace kiln {

template <typename M>
using wrapping_t = std::conditional_t<(sizeof(M) > sizeof(unsigned)), unsigned long long, unsigned>;

template <typename M>
KILN_HOST_DEVICE inline M wrapping_add(M a, M b) {
  if constexpr (std::is_integral_v<M>) {
    return static_cast<M>(static_cast<wrapping_t<M>>(a) + static_cast<wrapping_t<M>>(b));
  } else {
    return a + b;
  }
}

template <typename M>
KILN_HOST_DEVICE inline M wrapping_sub(M a, M b) {
  if constexpr (std::is_integral_v<M>) {
    return static_cast<M>(static_cast<wrapping_t<M>>(a) - static_cast<wrapping_t<M>>(b));
  } else {
    return a - b;
  }
}

template <typename M>
KILN_HOST_DEVICE inline M wrapping_mul(M a, M b) {
  if constexpr (std::is_integral_v<M>) {
    return static_cast<M>(static_cast<wrapping_t<M>>(a) * static_cast<wrapping_t<M>>(b));
  } else {
    return a * b;
  }
}

template <typename M>
KILN_HOST_DEVICE inline M wrapping_neg(M a) {
  return wrapping_sub(M(0), a);
}

}  // namespace kiln
