// Shared option checks (optim/option_checks.h). NaN fails every check, as it should.
#include "optim/option_checks.h"

#include "core/error.h"

namespace kiln::optim {

void check_at_least(const std::string& who, const char* name, double value, double low) {
  KILN_CHECK(value >= low, who, ": invalid ", name, " ", value, " (must be >= ", low, ")");
}

void check_in_range(const std::string& who, const char* name, double value, double low, double high) {
  KILN_CHECK(value >= low && value < high, who, ": invalid ", name, " ", value, " (must be in [", low, ", ", high,
             "))");
}

}  // namespace kiln::optim
