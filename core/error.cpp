// Builds the messages of kiln::Error for KILN_CHECK and KILN_ASSERT (see error.h).
#include "core/dims.h"
#include "core/error.h"

namespace kiln {

std::ostream& operator<<(std::ostream& os, const std::vector<int64_t>& values) { return write_int_list(os, values); }

std::string shape_str(const std::vector<int64_t>& values) {
  std::ostringstream os;
  os << values;
  return os.str();
}

namespace detail {

void throw_user_error(std::string message) { throw Error(std::move(message)); }

void throw_internal_error(const char* file, int line, const char* condition,
                          std::string message) {
  throw Error(str_cat("internal error (a Kiln bug, please report it): ", file, ":", line,
                      ": expected ", condition, message.empty() ? "" : ": ", message));
}

}  // namespace detail
}  // namespace kiln
