// use_short_openmp_spins (openmp_waits.h): setenv, then execv of /proc/self/exe; any failure
// leaves the program running as it was.
#include "kiln/openmp_waits.h"

#include <unistd.h>

#include <cstdlib>

namespace kiln {

void use_short_openmp_spins(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr || std::getenv("GOMP_SPINCOUNT") != nullptr ||
      std::getenv("KILN_OPENMP_SPINS") != nullptr || argv == nullptr || argv[0] == nullptr)
    return;
  if (::setenv("GOMP_SPINCOUNT", "1000", 0) != 0 || ::setenv("KILN_OPENMP_SPINS", "1", 0) != 0) return;
  ::execv("/proc/self/exe", argv);  // returns only on failure: go on with libgomp's default
  ::unsetenv("GOMP_SPINCOUNT");
  ::unsetenv("KILN_OPENMP_SPINS");
}

std::string openmp_spins() {
  const char* policy = std::getenv("OMP_WAIT_POLICY");
  const char* spins = std::getenv("GOMP_SPINCOUNT");
  const bool ours = std::getenv("KILN_OPENMP_SPINS") != nullptr;
  if (spins != nullptr) return std::string("GOMP_SPINCOUNT=") + spins + (ours ? " (set by Kiln)" : " (yours)");
  if (policy != nullptr) return std::string("OMP_WAIT_POLICY=") + policy + " (yours)";
  return "libgomp's default (300000 spins)";
}

}  // namespace kiln
