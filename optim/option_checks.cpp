// Shared option checks (optim/option_checks.h). NaN fails every check, as it should.
#include "optim/option_checks.h"

#include "core/error.h"

namespace kiln::optim {

void check_at_least(const std::string& who, const Options& options, const std::string& name, double low) {
  const double value = options.at(name);
  KILN_CHECK(value >= low, who, ": invalid ", name, " ", value, " (must be >= ", low, ")");
}

void check_in_range(const std::string& who, const Options& options, const std::string& name, double low,
                    double high) {
  const double value = options.at(name);
  KILN_CHECK(value >= low && value < high, who, ": invalid ", name, " ", value, " (must be in [", low, ", ", high,
             "))");
}

void check_flag(const std::string& who, const Options& options, const std::string& name) {
  const double value = options.at(name);
  KILN_CHECK(value == 0 || value == 1, who, ": option ", name, " is a flag, 0 or 1, got ", value);
}

}  // namespace kiln::optim
