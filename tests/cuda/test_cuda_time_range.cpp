// TimeRange with a GPU (core/time_range.h): a range around GPU work records events and
// reports device milliseconds at stop(); and the host-sync counters (core/host_sync.h) on
// a GPU: item() is an Item and a CopyToHost, a device synchronize counts, an asynchronous
// copy to pinned memory does not. Skips without a GPU.
#include <gtest/gtest.h>

#include "core/backend.h"
#include "core/host_sync.h"
#include "core/time_range.h"
#include "tests/cuda/cuda_test_util.h"

namespace kiln {
namespace {

using testing::kCuda;

TEST(CudaTimeRange, DeviceRangesReportDeviceTime) {
  KILN_REQUIRE_CUDA();
  const Tensor a = randn({512, 512}, {.dtype = DType::Float32, .device = kCuda});
  Timeline timeline;
  {
    TimeRange range("matmuls", kCuda);
    Tensor c = a;
    for (int i = 0; i < 20; ++i)
      c = c.matmul(a).div(scalar_tensor(512.0, {.dtype = DType::Float32, .device = kCuda}));
  }
  const auto records = timeline.stop();
  ASSERT_EQ(records.size(), 1u);
  ASSERT_TRUE(records[0].device_ms.has_value());
  EXPECT_GT(*records[0].device_ms, 0.0);
}

TEST(CudaTimeRange, HostSyncsOnAGpu) {
  KILN_REQUIRE_CUDA();
  const Tensor t = ones({1000}, {.dtype = DType::Float32, .device = kCuda});
  HostSyncs before = host_syncs();
  (void)t.sum().item<float>();
  HostSyncs counted = host_syncs() - before;
  EXPECT_EQ(counted.item, 1);
  EXPECT_EQ(counted.copy_to_host, 1);
  before = host_syncs();
  Tensor pinned = empty({1000}, {.dtype = DType::Float32, .pin_memory = true});
  pinned.copy_(t, /*non_blocking=*/true);  // no wait
  synchronize(kCuda);                      // one wait
  counted = host_syncs() - before;
  EXPECT_EQ(counted.copy_to_host, 0);
  EXPECT_EQ(counted.synchronize, 1);
}

}  // namespace
}  // namespace kiln
