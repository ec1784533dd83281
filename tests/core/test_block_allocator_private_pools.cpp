// Private pools of the caching allocator's bookkeeping (Note [Private pools] in
// core/block_allocator.h), on the fake device: what a CUDA graph's capture allocates stays
// the graph's, no event is queried or recorded and no segment given back while a capture
// is under way, and releasing the pool gives its memory back, never from a deleter.
#include <gtest/gtest.h>

#include "core/block_allocator.h"
#include "tests/core/fake_device_memory.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

using testing::FakeDevice;
using testing::kMiB;

constexpr StreamId kCapturing = 0x1000;
constexpr StreamId kOther = 0x2000;
constexpr PoolId kPool = 7;

TEST(PrivatePools, CaptureBlocksAreReusedByTheCaptureAndNeverByEagerWork) {
  FakeDevice device;
  BlockAllocator allocator(Device::cuda(0), device);
  void* eager = allocator.allocate(4096, kCapturing);
  allocator.free(eager);  // cached for the stream, before the capture

  allocator.begin_private_pool(kCapturing, kPool);
  void* first = allocator.allocate(4096, kCapturing);
  EXPECT_NE(first, eager);  // the stream's cache is not the pool's
  EXPECT_EQ(device.mallocs, 2);
  allocator.free(first);
  void* second = allocator.allocate(4096, kCapturing);
  EXPECT_EQ(second, first);  // freed during the capture: the capture may take it again
  allocator.end_private_pool(kCapturing);

  allocator.free(second);
  void* after = allocator.allocate(4096, kCapturing);
  EXPECT_EQ(after, eager);  // the stream's own cache again, never the pool's block
  void* more = allocator.allocate(4096, kCapturing);
  EXPECT_NE(more, second);
  EXPECT_EQ(allocator.private_pool_reserved_bytes(kPool), 2 * kMiB);  // one small segment
  allocator.free(after);
  allocator.free(more);
}

TEST(PrivatePools, OnlyTheCapturingStreamIsRedirected) {
  FakeDevice device;
  BlockAllocator allocator(Device::cuda(0), device);
  void* other = allocator.allocate(4096, kOther);
  allocator.free(other);
  allocator.begin_private_pool(kCapturing, kPool);
  EXPECT_TRUE(allocator.capture_under_way());
  EXPECT_EQ(allocator.allocate(4096, kOther), other);  // a loader's copy stream, say
  allocator.free(other);
  allocator.end_private_pool(kCapturing);
  EXPECT_FALSE(allocator.capture_under_way());
  EXPECT_EQ(allocator.private_pool_reserved_bytes(kPool), 0u);
}

TEST(PrivatePools, LaterCapturesIntoTheSamePoolShareIt) {
  FakeDevice device;
  BlockAllocator allocator(Device::cuda(0), device);
  allocator.begin_private_pool(kCapturing, kPool);
  void* first = allocator.allocate(8192, kCapturing);
  allocator.free(first);
  allocator.end_private_pool(kCapturing);
  allocator.begin_private_pool(kCapturing, kPool);  // another shape of the same step
  EXPECT_EQ(allocator.allocate(8192, kCapturing), first);
  allocator.free(first);
  allocator.end_private_pool(kCapturing);
  EXPECT_EQ(device.mallocs, 1);
}

TEST(PrivatePools, NoEventIsQueriedOrRecordedDuringACapture) {
  FakeDevice device;
  BlockAllocator allocator(Device::cuda(0), device);
  void* pending = allocator.allocate(4096, kCapturing);
  allocator.record_stream(pending, kOther);
  allocator.free(pending);  // waits for an event on kOther
  ASSERT_EQ(device.events.size(), 1u);

  allocator.begin_private_pool(kCapturing, kPool);
  const int queries = device.queries;
  void* held = allocator.allocate(4096, kCapturing);
  allocator.record_stream(held, kOther);
  allocator.free(held);  // would record an event: deferred to the capture's end
  void* again = allocator.allocate(4096, kCapturing);
  EXPECT_NE(again, held);  // still held for kOther
  EXPECT_EQ(device.queries, queries);
  EXPECT_EQ(device.events.size(), 1u);
  EXPECT_EQ(allocator.stats().active_blocks, 3);  // pending, held, again
  allocator.end_private_pool(kCapturing);
  ASSERT_EQ(device.events.size(), 2u);
  EXPECT_EQ(device.events[1].stream, kOther);
  allocator.free(again);
  device.complete_events_on(kOther);
  allocator.empty_cache();  // processes the events; the pool's memory stays
  EXPECT_EQ(allocator.stats().active_blocks, 0);
  EXPECT_EQ(allocator.private_pool_reserved_bytes(kPool), 2 * kMiB);
}

TEST(PrivatePools, RunningOutOfMemoryDuringACaptureReleasesNothing) {
  FakeDevice device;
  device.capacity = 22 * kMiB;
  BlockAllocator allocator(Device::cuda(0), device);
  void* cached = allocator.allocate(12 * kMiB, kOther);
  allocator.free(cached);  // a releasable cached segment
  allocator.begin_private_pool(kCapturing, kPool);
  EXPECT_KILN_ERROR(allocator.allocate(12 * kMiB, kCapturing), "out of memory", "during a CUDA graph capture");
  EXPECT_EQ(device.frees, 0);
  EXPECT_KILN_ERROR(allocator.empty_cache(), "empty_cache during a CUDA graph capture");
  allocator.end_private_pool(kCapturing);
  void* fits = allocator.allocate(12 * kMiB, kCapturing);  // eager: the retry releases the cache
  EXPECT_EQ(device.frees, 1);
  allocator.free(fits);
}

TEST(PrivatePools, ReleasingThePoolGivesItsFreeMemoryBackNowAndTheRestWithTheCache) {
  FakeDevice device;
  BlockAllocator allocator(Device::cuda(0), device);
  allocator.begin_private_pool(kCapturing, kPool);
  void* output = allocator.allocate(4096, kCapturing);       // the graph's output, kept by the user
  void* scratch = allocator.allocate(4096, kCapturing);      // same small segment
  void* large = allocator.allocate(30 * kMiB, kCapturing);   // a segment of its own
  allocator.free(scratch);
  allocator.free(large);
  allocator.end_private_pool(kCapturing);
  allocator.empty_cache();  // a live graph's memory is not the cache's to give back
  EXPECT_EQ(device.frees, 0);
  EXPECT_EQ(allocator.private_pool_reserved_bytes(kPool), 2 * kMiB + 30 * kMiB);

  allocator.release_private_pool(kPool);  // the graph is destroyed
  EXPECT_EQ(device.frees, 1);             // the large segment; the small one holds the output
  EXPECT_EQ(allocator.private_pool_reserved_bytes(kPool), 2 * kMiB);
  allocator.free(output);  // a tensor's deleter: no device free (cudaFree would synchronize)
  EXPECT_EQ(device.frees, 1);
  void* eager = allocator.allocate(4096, kCapturing);  // a released pool's memory is never reused
  EXPECT_EQ(device.mallocs, 3);
  allocator.free(eager);
  allocator.empty_cache();
  EXPECT_EQ(device.frees, 3);
  EXPECT_EQ(allocator.private_pool_reserved_bytes(kPool), 0u);
  EXPECT_EQ(allocator.stats().reserved_bytes, 0u);
  EXPECT_TRUE(device.live().empty());
}

TEST(PrivatePools, NothingIsGivenBackWhileAnotherCaptureIsUnderWay) {
  FakeDevice device;
  BlockAllocator allocator(Device::cuda(0), device);
  allocator.begin_private_pool(kCapturing, kPool);
  allocator.free(allocator.allocate(30 * kMiB, kCapturing));
  allocator.end_private_pool(kCapturing);
  allocator.begin_private_pool(kOther, kPool + 1);  // another graph captures
  allocator.release_private_pool(kPool);            // the first graph is destroyed meanwhile
  EXPECT_EQ(device.frees, 0);
  allocator.end_private_pool(kOther);
  allocator.empty_cache();
  EXPECT_EQ(device.frees, 1);
}

TEST(PrivatePools, TheCapturingStreamIsAPoolBlocksOwnStream) {
  FakeDevice device;
  BlockAllocator allocator(Device::cuda(0), device);
  allocator.begin_private_pool(kCapturing, kPool);
  void* block = allocator.allocate(4096, kCapturing);
  allocator.record_stream(block, kCapturing);  // not a use on another stream
  allocator.free(block);
  EXPECT_EQ(allocator.allocate(4096, kCapturing), block);  // back in the pool at once
  allocator.free(block);
  allocator.end_private_pool(kCapturing);
  EXPECT_TRUE(device.events.empty());
}

TEST(PrivatePools, MisuseIsAClearError) {
  FakeDevice device;
  BlockAllocator allocator(Device::cuda(0), device);
  EXPECT_KILN_ERROR(allocator.begin_private_pool(kCapturing, 0), "private pool ids");
  EXPECT_KILN_ERROR(allocator.end_private_pool(kCapturing), "no capture is under way");
  allocator.begin_private_pool(kCapturing, kPool);
  EXPECT_KILN_ERROR(allocator.begin_private_pool(kCapturing, kPool + 1), "already under way");
  EXPECT_KILN_ERROR(allocator.release_private_pool(kPool), "while a capture into it is under way");
  allocator.end_private_pool(kCapturing);
  allocator.release_private_pool(kPool);
  EXPECT_KILN_ERROR(allocator.begin_private_pool(kCapturing, kPool), "was released");

  FakeDevice uncached_device;
  BlockAllocator uncached(Device::cuda(0), uncached_device, /*caching=*/false);
  EXPECT_KILN_ERROR(uncached.begin_private_pool(kCapturing, kPool), "needs the caching allocator");
}

}  // namespace
}  // namespace kiln
