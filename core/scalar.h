// Scalar: a C++ number handed to an op (fill value, clamp bound, `x + 2`).
//
// It remembers whether it was a bool, an integer or a floating number, because that
// category takes part in type promotion as a "wrapped number" (Note [Type promotion]),
// and integers keep all 64 bits (a double would lose them past 2^53).
//
// Note [Floating scalars as integers]: a floating Scalar asked for an integer type (filling
// an Int64 tensor with 2.5, item<int64_t>() of a float tensor) truncates toward zero, as
// PyTorch does; a value the integer type cannot hold (NaN, an infinity, 1e30 for Int32) is
// a kiln::Error, as PyTorch's "cannot be converted to type ... without overflow", not the
// undefined behaviour of a plain cast. to_int() of a floating Scalar saturates (NaN -> 0);
// the ops read it only for integral Scalars.
#pragma once

#include <cstdint>
#include <ostream>
#include <string_view>
#include <type_traits>

#include "core/checked_math.h"
#include "core/dtype.h"

namespace kiln {

class Scalar {
 public:
  Scalar() : Scalar(int64_t{0}) {}
  Scalar(bool v) : kind_(DType::Bool), i_(v), d_(v) {}
  Scalar(double v) : kind_(DType::Float64), i_(saturating_cast<int64_t>(v)), d_(v) {}
  Scalar(float v) : Scalar(static_cast<double>(v)) {}
  template <typename I, std::enable_if_t<std::is_integral_v<I> && !std::is_same_v<I, bool>, int> = 0>
  Scalar(I v) : kind_(DType::Int64), i_(static_cast<int64_t>(v)), d_(static_cast<double>(v)) {}

  // Bool, Int64 or Float64: the category of the number.
  DType kind() const { return kind_; }
  bool is_floating() const { return kind_ == DType::Float64; }
  double to_double() const { return d_; }
  int64_t to_int() const { return i_; }

  // Throws the error of Note [Floating scalars as integers], naming `op`, when the value
  // cannot be converted to `dtype`; ops that store a Scalar check it before any work.
  void check_representable(DType dtype, std::string_view op) const;

  // The value as T (float types from the double, integers from the int64; a floating
  // value an integer T cannot hold throws, Note [Floating scalars as integers]).
  template <typename T>
  T to() const {
    if constexpr (is_floating_v<T>) {
      return static_cast<T>(static_cast<opmath_t<T>>(d_));
    } else if constexpr (std::is_same_v<T, bool>) {
      return is_floating() ? d_ != 0.0 : i_ != 0;
    } else {
      if (!is_floating()) return static_cast<T>(i_);
      if (!fits_integer<T>(d_)) throw_not_representable(dtype_of_v<T>, "Scalar");
      return static_cast<T>(d_);
    }
  }

 private:
  // Throws the kiln::Error of Note [Floating scalars as integers], naming `op`.
  [[noreturn]] void throw_not_representable(DType dtype, std::string_view op) const;

  DType kind_;
  int64_t i_;
  double d_;
};

std::ostream& operator<<(std::ostream& os, const Scalar& s);

}  // namespace kiln
