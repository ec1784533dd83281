// kiln::cudnn's switches (core/cudnn.h), which live in core and so are tested without a
// GPU: a ScopedMode sets both for its scope and puts back what was there, on an
// exception's way out too, and scopes nest.
#include <gtest/gtest.h>

#include <stdexcept>

#include "core/cudnn.h"

namespace kiln {
namespace {

TEST(CudnnSwitches, AScopedModeSetsBothSwitchesAndPutsBackWhatWasThere) {
  const cudnn::ScopedMode outer(/*benchmark=*/true, /*deterministic=*/false);
  EXPECT_TRUE(cudnn::benchmark());
  EXPECT_FALSE(cudnn::deterministic());
  {
    const cudnn::ScopedMode inner(/*benchmark=*/false, /*deterministic=*/true);
    EXPECT_FALSE(cudnn::benchmark());
    EXPECT_TRUE(cudnn::deterministic());
  }
  EXPECT_TRUE(cudnn::benchmark());
  EXPECT_FALSE(cudnn::deterministic());
  try {
    const cudnn::ScopedMode failing(/*benchmark=*/false, /*deterministic=*/true);
    throw std::runtime_error("a failing test");
  } catch (const std::runtime_error&) {
  }
  EXPECT_TRUE(cudnn::benchmark());
  EXPECT_FALSE(cudnn::deterministic());
}

}  // namespace
}  // namespace kiln
