// The CUDA runtime pieces: availability reporting, device properties and guard, streams
// and events. Without a GPU only the availability test runs; the rest skip.
#include <gtest/gtest.h>

#include "core/ops.h"
#include "tests/cuda/cuda_test_util.h"

namespace kiln {
namespace {

using testing::kCuda;

TEST(CudaRuntime, UnavailableCudaIsAClearErrorNotACrash) {
  if (cuda_is_available()) {
    EXPECT_GT(cuda_device_count(), 0);
    return;
  }
  EXPECT_EQ(cuda_device_count(), 0);
  EXPECT_FALSE(cuda_unavailable_reason().empty());
  EXPECT_KILN_ERROR(zeros({2}, {.dtype = DType::Float32, .device = kCuda}), "CUDA is not available");
  EXPECT_KILN_ERROR(ones({2}).to(kCuda), "CUDA is not available");
  EXPECT_KILN_ERROR(empty({2}, {.dtype = DType::Float32, .pin_memory = true}), "pin_memory", "not available");
  EXPECT_FALSE(ones({2}).is_pinned());
}

TEST(CudaRuntime, RoundTripThroughTheDevice) {
  KILN_REQUIRE_CUDA();
  const Tensor x = testing::random_nonzero({3, 4}, DType::Float32, 1);
  const Tensor y = x.to(kCuda);
  EXPECT_EQ(y.device(), kCuda);
  EXPECT_TRUE(testing::all_equal(y.cpu(), x));
}

// kiln::memory_stats(Device) reads the GPU's caching allocator: a live tensor counts, and
// the peak resets to what is allocated now.
TEST(CudaRuntime, MemoryStatsOfTheDevice) {
  KILN_REQUIRE_CUDA();
  const AllocatorStats before = memory_stats(testing::kCuda);
  {
    const Tensor a = empty({1 << 20}, {.dtype = DType::Float32, .device = testing::kCuda});
    EXPECT_GE(memory_stats(testing::kCuda).allocated_bytes, before.allocated_bytes + (4u << 20));
  }
  reset_peak_memory_stats(testing::kCuda);
  EXPECT_EQ(memory_stats(testing::kCuda).peak_allocated_bytes, memory_stats(testing::kCuda).allocated_bytes);
}

TEST(CudaRuntime, DeviceIndexOutOfRangeIsAnError) {
  KILN_REQUIRE_CUDA();
  EXPECT_KILN_ERROR(zeros({2}, {.dtype = DType::Float32, .device = Device::cuda(cuda_device_count())}), "out of range");
}

TEST(CudaRuntime, PinnedMemoryIsPinnedAndCopiesBack) {
  KILN_REQUIRE_CUDA();
  const Tensor x = testing::random_nonzero({1000}, DType::Float32, 2);
  const Tensor pinned = x.pin_memory();
  EXPECT_TRUE(pinned.is_pinned());
  EXPECT_FALSE(x.is_pinned());
  EXPECT_TRUE(pinned.pin_memory().is_same(pinned));
  const Tensor on_gpu = pinned.to(kCuda, /*non_blocking=*/true);
  synchronize(kCuda);
  EXPECT_TRUE(testing::all_equal(on_gpu.cpu(), x));
}

}  // namespace
}  // namespace kiln
