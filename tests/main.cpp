// The test binary's main: registers the backends (kiln::init), then runs GoogleTest.
#include <gtest/gtest.h>

#include "kiln/init.h"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  kiln::init();
  return RUN_ALL_TESTS();
}
