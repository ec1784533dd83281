// The allocation fault seam (Note [Injected allocation failures]): the allocation it is
// armed for throws an out-of-memory kiln::Error and no other does, it counts only its own
// thread, nested guards stand in for each other, and stepping n through an operation
// reaches its end.
#include <gtest/gtest.h>

#include <thread>

#include "core/fault_injection.h"
#include "core/ops.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

TEST(FaultInjection, TheNthAllocationThrowsAndNoOther) {
  FailNthAllocation fail(2);
  const Tensor a = empty({4});
  const Tensor b = zeros({8}, {.dtype = DType::Int64});
  EXPECT_FALSE(fail.fired());
  EXPECT_KILN_ERROR(ones({3}), "out of memory", "injected", "allocation 2");
  EXPECT_TRUE(fail.fired());
  EXPECT_EQ(fail.allocations(), 3);
  const Tensor c = ones({3});  // only allocation 2 fails
  EXPECT_EQ(fail.allocations(), 4);
}

TEST(FaultInjection, DisarmedWhenTheGuardEnds) {
  { FailNthAllocation fail(0); }
  EXPECT_NO_THROW(ones({3}));
  EXPECT_KILN_ERROR(FailNthAllocation(-1), "FailNthAllocation", "-1");
}

TEST(FaultInjection, CountsOnlyItsOwnThread) {
  FailNthAllocation fail(0);
  std::thread other([] { EXPECT_NO_THROW(ones({3})); });
  other.join();
  EXPECT_EQ(fail.allocations(), 0);
  EXPECT_KILN_ERROR(ones({3}), "injected");
}

TEST(FaultInjection, AnInnerGuardStandsInForTheOuterOne) {
  FailNthAllocation outer(1);
  {
    FailNthAllocation inner(5);
    const Tensor a = ones({2});
    const Tensor b = ones({2});
    EXPECT_EQ(inner.allocations(), 2);
  }
  EXPECT_EQ(outer.allocations(), 0);
  const Tensor c = ones({2});
  EXPECT_KILN_ERROR(ones({2}), "injected", "allocation 1");
}

// The loop of the Note (testing::fail_each_allocation): every allocation of an op fails
// once, each failure is the injected one, then the op runs through.
TEST(FaultInjection, SteppingThroughAnOperationReachesItsEnd) {
  const Tensor x = testing::random_nonzero({3, 4}, DType::Float32);
  int64_t checks = 0;
  const int64_t failures = testing::fail_each_allocation(
      [&] { const Tensor y = x.to(DType::Float64).transpose(0, 1).contiguous(); }, [&] { ++checks; });
  EXPECT_EQ(failures, 2);  // the float64 copy and the contiguous one
  EXPECT_EQ(checks, failures);
}

}  // namespace
}  // namespace kiln
