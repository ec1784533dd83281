// signal_name (signal_name.h).
#include "core/signal_name.h"

#include <string.h>

namespace kiln {

std::string signal_name(int signal) {
  const char* abbreviation = ::sigabbrev_np(signal);
  return abbreviation ? std::string("SIG") + abbreviation : "signal " + std::to_string(signal);
}

}  // namespace kiln
