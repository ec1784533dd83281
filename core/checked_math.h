// Overflow-checked integer arithmetic and float-to-integer conversion: the one place where
// Kiln multiplies sizes, adds offsets or turns a double into an integer without undefined
// behaviour. Signed overflow and converting a NaN, an infinity or an out-of-range double to
// an integer are undefined in C++ (a compiler may assume they never happen), so every such
// computation on user-controlled numbers goes through these and reports the overflow,
// which the caller turns into a kiln::Error naming the op and the numbers.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <type_traits>

namespace kiln {

// a * b, or nullopt when it does not fit int64.
inline std::optional<int64_t> checked_mul(int64_t a, int64_t b) {
  int64_t product = 0;
  if (__builtin_mul_overflow(a, b, &product)) return std::nullopt;
  return product;
}

// a + b, or nullopt when it does not fit int64.
inline std::optional<int64_t> checked_add(int64_t a, int64_t b) {
  int64_t sum = 0;
  if (__builtin_add_overflow(a, b, &sum)) return std::nullopt;
  return sum;
}

// Whether v truncated toward zero (what static_cast does) is a value of the integer type
// I; false for NaN and infinities. The bounds are powers of two, exact in a double, so
// the comparisons are exact for every I up to 64 bits.
template <typename I>
bool fits_integer(double v) {
  static_assert(std::is_integral_v<I> && !std::is_same_v<I, bool>);
  const double t = std::trunc(v);
  constexpr double lowest = static_cast<double>(std::numeric_limits<I>::min());
  // max + 1 = 2^(value bits): exact, where max itself may not be (2^63 - 1 is not).
  constexpr double above_max = 2.0 * static_cast<double>(std::numeric_limits<I>::max() / 2 + 1);
  return t >= lowest && t < above_max;  // false for NaN
}

// v truncated toward zero, clamped to I's range, NaN -> 0: a defined answer for any double.
template <typename I>
I saturating_cast(double v) {
  if (std::isnan(v)) return 0;
  if (fits_integer<I>(v)) return static_cast<I>(v);
  return v < 0 ? std::numeric_limits<I>::min() : std::numeric_limits<I>::max();
}

}  // namespace kiln
