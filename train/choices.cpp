// The one error of an unknown choice (train/choices.h).
#include "train/choices.h"

#include "core/error.h"

namespace kiln::train {

void throw_unknown_choice(const char* setting, const std::string& choices, std::string_view text) {
  throw Error(std::string("config: ") + setting + " is one of " + choices + ", got '" + std::string(text) + "'");
}

}  // namespace kiln::train
