// parse_number and parse_class_index (data/label_text.h): strtod and from_chars, whole
// text only.
#include "data/label_text.h"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>

#include "core/error.h"

namespace kiln::data {

double parse_number(const std::string& text, const std::string& where) {
  const char* begin = text.c_str();
  char* end = nullptr;
  errno = 0;
  const double value = std::strtod(begin, &end);
  KILN_CHECK(end != begin && *end == '\0' && errno == 0 && std::isfinite(value), where, ": '", text,
             "' is not a finite number");
  return value;
}

int64_t parse_class_index(const std::string& text, const std::string& where) {
  int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  KILN_CHECK(error == std::errc() && end == text.data() + text.size() && value >= 0, where, ": '", text,
             "' is not a class index (an integer >= 0)");
  return value;
}

}  // namespace kiln::data
