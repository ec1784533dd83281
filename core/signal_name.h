// A signal's name as messages write it: "SIGTERM", "SIGUSR1" (glibc's sigabbrev_np with
// "SIG" before it), or "signal N" for a number without one.
#pragma once

#include <string>

namespace kiln {

std::string signal_name(int signal);

}  // namespace kiln
