// Device printing and parsing ("cpu", "cuda", "cuda:1").
#include "core/device.h"

#include <charconv>

#include "core/error.h"

namespace kiln {

Device Device::parse(const std::string& text) {
  if (text == "cpu") return cpu();
  if (text == "cuda") return cuda(0);
  if (text.rfind("cuda:", 0) == 0) {
    int index = -1;
    const char* first = text.data() + 5;
    const char* last = text.data() + text.size();
    const auto [end, ec] = std::from_chars(first, last, index);
    if (ec == std::errc() && end == last && first != last && index >= 0) return cuda(index);
  }
  KILN_CHECK(false, "Device: cannot parse '", text, "' (expected cpu, cuda or cuda:N)");
  return cpu();
}

std::string Device::str() const {
  return is_cpu() ? std::string(type_name()) : std::string(type_name()) + ":" + std::to_string(index);
}

std::ostream& operator<<(std::ostream& os, const Device& device) { return os << device.str(); }

}  // namespace kiln
