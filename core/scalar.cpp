// Printing of Scalar.
#include "core/scalar.h"

namespace kiln {

std::ostream& operator<<(std::ostream& os, const Scalar& s) {
  if (s.kind() == DType::Bool) return os << (s.to_int() ? "true" : "false");
  if (s.is_floating()) return os << s.to_double();
  return os << s.to_int();
}

}  // namespace kiln
