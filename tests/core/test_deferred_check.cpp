// Deferred index checks (core/deferred_check.h): without a scope nothing is deferred; in
// one, checks wait for check(), run in order, and the first failure throws and clears the
// queue; one scope per thread; a scope that ends drops what it holds. (The CUDA index ops
// that defer are tested in tests/cuda/test_cuda_trainer.cpp.) During a capture
// (CapturedIndexChecks, Note [Index checks in a CUDA graph]) checks go to the capture, not
// to the scope, and each checked op gets its own slot of the graph's flags.
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

Tensor capture_flags() { return zeros({2 * kMaxCapturedIndexChecks}, {.dtype = DType::Int64}); }

TEST(CapturedIndexChecks, ChecksGoToTheCaptureWithOrWithoutAScope) {
  DeferIndexChecks deferred;
  std::vector<int> ran;
  std::vector<DeferredCheck> taken;
  {
    CapturedIndexChecks capture(capture_flags());
    EXPECT_TRUE(defer_index_check([&] { ran.push_back(1); }));
    EXPECT_TRUE(defer_index_check([&] { ran.push_back(2); }));
    EXPECT_EQ(deferred.pending(), 0u) << "a captured check belongs to the graph, not to the scope";
    taken = capture.take();
    EXPECT_TRUE(capture.take().empty());
  }
  ASSERT_EQ(taken.size(), 2u);
  for (const DeferredCheck& check : taken) check();
  EXPECT_EQ(ran, (std::vector<int>{1, 2}));
  EXPECT_TRUE(defer_index_check([] {})) << "after the capture the scope defers again";
  EXPECT_EQ(deferred.pending(), 1u);
  {
    CapturedIndexChecks capture(capture_flags());
    EXPECT_TRUE(defer_index_check([] {}));  // no scope needed during a capture
    EXPECT_KILN_ERROR(CapturedIndexChecks{capture_flags()}, "already captures");
  }
}

TEST(CapturedIndexChecks, EachCheckedOpGetsItsOwnFlagUntilTheyRunOut) {
  EXPECT_FALSE(captured_index_flag(Device::cpu(), "gather").defined()) << "no capture: no flag";
  const Tensor flags = capture_flags();
  CapturedIndexChecks capture(flags);
  std::vector<const void*> seen;
  for (int64_t i = 0; i < kMaxCapturedIndexChecks; ++i) {
    const Tensor flag = captured_index_flag(Device::cpu(), "gather");
    ASSERT_EQ(flag.sizes(), (std::vector<int64_t>{2}));
    EXPECT_EQ(flag.data_ptr(), static_cast<const int64_t*>(flags.data_ptr()) + 2 * i);
    seen.push_back(flag.data_ptr());
  }
  EXPECT_KILN_ERROR(captured_index_flag(Device::cpu(), "index_select"), "index_select", "more than 64",
                    "bounds-checked index ops");
  EXPECT_KILN_ERROR(captured_index_flag(Device::cuda(0), "gather"), "gather", "cuda:0", "captures a CUDA graph on cpu");
  EXPECT_KILN_ERROR(CapturedIndexChecks{Tensor()}, "already captures");
}

TEST(CapturedIndexChecks, TheFlagsMustBeTheGraphsZeroedInt64Slots) {
  EXPECT_KILN_ERROR(CapturedIndexChecks{zeros({4}, {.dtype = DType::Int64})}, "Int64 tensor of 128");
  EXPECT_KILN_ERROR(CapturedIndexChecks{zeros({128})}, "Int64 tensor of 128");
}

}  // namespace
}  // namespace kiln
