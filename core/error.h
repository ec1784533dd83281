// Errors: kiln::Error and the two tiers of checks.
//
// KILN_CHECK(cond, parts...) is for user errors: it throws kiln::Error whose message is
// the parts streamed together; by convention the message starts with the op name and
// names the offending shapes/dtypes/devices ("add: shapes [2, 3] and [4] ..."). It never
// aborts. KILN_ASSERT(cond, parts...) guards internal invariants: a failure is a Kiln bug,
// and the message says so with the file and line.
#pragma once

#include <cstdint>
#include <ostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace kiln {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Shapes print as [2, 3, 4] in every message.
std::ostream& operator<<(std::ostream& os, const std::vector<int64_t>& values);
std::string shape_str(const std::vector<int64_t>& values);

namespace detail {

template <typename... Parts>
std::string str_cat(const Parts&... parts) {
  std::ostringstream os;
  (os << ... << parts);
  return os.str();
}

[[noreturn]] void throw_user_error(std::string message);
[[noreturn]] void throw_internal_error(const char* file, int line, const char* condition,
                                       std::string message);

}  // namespace detail
}  // namespace kiln

#define KILN_CHECK(cond, ...)                                                 \
  do {                                                                        \
    if (!(cond)) [[unlikely]] {                                               \
      ::kiln::detail::throw_user_error(::kiln::detail::str_cat(__VA_ARGS__)); \
    }                                                                         \
  } while (0)

#define KILN_ASSERT(cond, ...)                                                          \
  do {                                                                                  \
    if (!(cond)) [[unlikely]] {                                                         \
      ::kiln::detail::throw_internal_error(__FILE__, __LINE__, #cond,                   \
                                           ::kiln::detail::str_cat("" __VA_OPT__(, ) __VA_ARGS__)); \
    }                                                                                   \
  } while (0)
