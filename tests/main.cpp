// The test binary's main: short OpenMP spins (kiln/openmp_waits.h), the backends
// registered (kiln::init), then GoogleTest.
#include <gtest/gtest.h>

#include "kiln/init.h"
#include "kiln/openmp_waits.h"

int main(int argc, char** argv) {
  kiln::use_short_openmp_spins(argv);  // Note [OpenMP under load]: ctest -j runs several at once
  ::testing::InitGoogleTest(&argc, argv);
  kiln::init();
  return RUN_ALL_TESTS();
}
