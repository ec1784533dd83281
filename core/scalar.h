// Scalar: a C++ number handed to an op (fill value, clamp bound, `x + 2`).
//
// It remembers whether it was a bool, an integer or a floating number, because that
// category takes part in type promotion as a "wrapped number" (Note [Type promotion]),
// and integers keep all 64 bits (a double would lose them past 2^53).
#pragma once

#include <cstdint>
#include <ostream>
#include <type_traits>

#include "core/dtype.h"

namespace kiln {

class Scalar {
 public:
  Scalar() : Scalar(int64_t{0}) {}
  Scalar(bool v) : kind_(DType::Bool), i_(v), d_(v) {}
  Scalar(double v) : kind_(DType::Float64), i_(static_cast<int64_t>(v)), d_(v) {}
  Scalar(float v) : Scalar(static_cast<double>(v)) {}
  template <typename I, std::enable_if_t<std::is_integral_v<I> && !std::is_same_v<I, bool>, int> = 0>
  Scalar(I v) : kind_(DType::Int64), i_(static_cast<int64_t>(v)), d_(static_cast<double>(v)) {}

  // Bool, Int64 or Float64: the category of the number.
  DType kind() const { return kind_; }
  bool is_floating() const { return kind_ == DType::Float64; }
  double to_double() const { return d_; }
  int64_t to_int() const { return i_; }

  // The value as T (float types from the double, integers from the int64).
  template <typename T>
  T to() const {
    if constexpr (is_floating_v<T>) {
      return static_cast<T>(static_cast<opmath_t<T>>(d_));
    } else if constexpr (std::is_same_v<T, bool>) {
      return is_floating() ? d_ != 0.0 : i_ != 0;
    } else {
      return is_floating() ? static_cast<T>(d_) : static_cast<T>(i_);
    }
  }

 private:
  DType kind_;
  int64_t i_;
  double d_;
};

std::ostream& operator<<(std::ostream& os, const Scalar& s);

}  // namespace kiln
