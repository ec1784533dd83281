// Range checks of optimizer options shared by SGD, Adam and RMSprop, with PyTorch's ranges
// and messages that name the optimizer, the option and its value. NaN fails every check.
#pragma once

#include <string>

namespace kiln::optim {

// value >= low ("SGD: invalid lr -0.1 (must be >= 0)").
void check_at_least(const std::string& who, const char* name, double value, double low);
// low <= value < high.
void check_in_range(const std::string& who, const char* name, double value, double low, double high);

}  // namespace kiln::optim
