// Checks of optimizer options shared by SGD, Adam and RMSprop, with PyTorch's ranges and
// messages that name the optimizer, the option and its value.
#pragma once

#include <string>

#include "optim/optimizer.h"

namespace kiln::optim {

// options[name] >= low ("SGD: invalid lr -0.1 (must be >= 0)").
void check_at_least(const std::string& who, const Options& options, const std::string& name, double low);
// low <= options[name] < high.
void check_in_range(const std::string& who, const Options& options, const std::string& name, double low,
                    double high);
// A boolean option: 0 or 1.
void check_flag(const std::string& who, const Options& options, const std::string& name);

}  // namespace kiln::optim
