// Printing of Scalar, and its error for a floating value no integer type can hold.
#include "core/scalar.h"

#include "core/error.h"

namespace kiln {

std::ostream& operator<<(std::ostream& os, const Scalar& s) {
  if (s.kind() == DType::Bool) return os << (s.to_int() ? "true" : "false");
  if (s.is_floating()) return os << s.to_double();
  return os << s.to_int();
}

void Scalar::check_representable(DType dtype, std::string_view op) const {
  if (!is_floating()) return;
  bool fits = true;
  switch (dtype) {
    case DType::Int64: fits = fits_integer<int64_t>(d_); break;
    case DType::Int32: fits = fits_integer<int32_t>(d_); break;
    case DType::UInt8: fits = fits_integer<uint8_t>(d_); break;
    default: break;  // floating and bool dtypes hold any double (as inf, or as true)
  }
  if (!fits) throw_not_representable(dtype, op);
}

void Scalar::throw_not_representable(DType dtype, std::string_view op) const {
  detail::throw_user_error(
      detail::str_cat(op, ": value ", d_, " cannot be converted to ", dtype, " without overflow"));
}

}  // namespace kiln
