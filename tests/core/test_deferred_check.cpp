// Deferred index checks (core/deferred_check.h): without a scope nothing is deferred; in
// one, checks wait for check(), run in order, and the first failure throws and clears the
// queue; one scope per thread; a scope that ends drops what it holds. (The CUDA index ops
// that defer are tested in tests/cuda/test_cuda_trainer.cpp.)
#include <gtest/gtest.h>

#include <thread>

#include "core/deferred_check.h"
#include "core/error.h"
#include "core/ops.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

TEST(DeferIndexChecks, ChecksWaitForCheckAndTheFirstFailureThrows) {
  EXPECT_FALSE(defer_index_check([] {}));  // no scope: the caller checks now
  std::vector<int> ran;
  {
    DeferIndexChecks deferred;
    EXPECT_TRUE(defer_index_check([&] { ran.push_back(1); }));
    EXPECT_TRUE(defer_index_check([&] { ran.push_back(2); }));
    EXPECT_TRUE(ran.empty());
    EXPECT_EQ(deferred.pending(), 2u);
    deferred.check();
    EXPECT_EQ(ran, (std::vector<int>{1, 2}));
    EXPECT_EQ(deferred.pending(), 0u);
    defer_index_check([] { throw Error("gather: index 7 is out of bounds for dimension 0 with size 5"); });
    defer_index_check([&] { ran.push_back(3); });
    EXPECT_KILN_ERROR(deferred.check(), "gather: index 7 is out of bounds");
    EXPECT_EQ(deferred.pending(), 0u);
    EXPECT_KILN_ERROR(DeferIndexChecks(), "already defers");
    // Another thread has its own (no) scope.
    bool other_deferred = true;
    std::thread([&] { other_deferred = defer_index_check([] {}); }).join();
    EXPECT_FALSE(other_deferred);
    defer_index_check([&] { ran.push_back(4); });
  }
  EXPECT_EQ(ran, (std::vector<int>{1, 2}));  // 3 dropped after the failure, 4 with the scope
  EXPECT_FALSE(defer_index_check([] {}));
}

// On the CPU an index op checks at once, scope or not.
TEST(DeferIndexChecks, CpuIndexOpsStillCheckAtOnce) {
  DeferIndexChecks deferred;
  EXPECT_KILN_ERROR(gather(ones({5}), 0, tensor<int64_t>({7})), "gather", "out of bounds");
  EXPECT_EQ(deferred.pending(), 0u);
}

}  // namespace
}  // namespace kiln
