// The pinned host allocator's bookkeeping (PinnedPool) on a fake host: size classes,
// reuse only after the recorded copies have completed, interior pointers, statistics,
// empty_cache, the out-of-memory retry. The real allocator is tested in
// test_cuda_allocator.cpp.
#include <gtest/gtest.h>

#include "kernels/cuda/pinned_pool.h"
#include "tests/cuda/internal/fake_memory.h"
#include "tests/test_util.h"

namespace kiln::cuda {
namespace {

using testing::as_bytes;
using testing::FakeHost;

constexpr StreamId kCopyStream = 0x2000;

TEST(PinnedPool, SizesRoundUpToPowersOfTwo) {
  EXPECT_EQ(pinned_size_class(1), 512u);
  EXPECT_EQ(pinned_size_class(512), 512u);
  EXPECT_EQ(pinned_size_class(513), 1024u);
  EXPECT_EQ(pinned_size_class(4096), 4096u);
  EXPECT_EQ(pinned_size_class(4097), 8192u);
}

TEST(PinnedPool, AFreedBlockWithoutCopiesIsReusedAtOnce) {
  FakeHost host;
  PinnedPool pool(host);
  void* first = pool.allocate(3000);
  EXPECT_EQ(host.live().begin()->second, 4096u);
  pool.free(first);
  EXPECT_EQ(pool.allocate(4096), first);  // same size class
  void* other_class = pool.allocate(5000);
  EXPECT_NE(other_class, first);
  EXPECT_EQ(host.mallocs, 2);
  pool.free(first);
  pool.free(other_class);
}

TEST(PinnedPool, ABlockIsReusedOnlyAfterItsCopiesHaveCompleted) {
  FakeHost host;
  PinnedPool pool(host);
  void* block = pool.allocate(1000);
  pool.record_use(as_bytes(block) + 100, /*device=*/1, kCopyStream);  // an interior pointer
  ASSERT_EQ(host.events.size(), 1u);
  EXPECT_EQ(host.events[0].device, 1);
  pool.free(block);
  EXPECT_EQ(pool.stats().cached_blocks, 1);  // cached, not yet reusable

  void* while_copying = pool.allocate(1000);
  EXPECT_NE(while_copying, block);
  EXPECT_EQ(host.mallocs, 2);

  host.complete_events_on(kCopyStream);
  EXPECT_EQ(pool.allocate(1000), block);
  EXPECT_EQ(host.events_alive(), 0);
  EXPECT_EQ(host.mallocs, 2);
  pool.free(block);
  pool.free(while_copying);
}

TEST(PinnedPool, CompletedUsesAreDroppedAsNewOnesAreRecorded) {
  FakeHost host;
  PinnedPool pool(host);
  void* staging = pool.allocate(1 << 20);
  for (int copy = 0; copy < 100; ++copy) {
    pool.record_use(staging, 0, kCopyStream);
    host.complete_events_on(kCopyStream);
  }
  EXPECT_LE(host.events_alive(), 1);
  pool.free(staging);
  EXPECT_EQ(host.events_alive(), 0);
}

TEST(PinnedPool, ContainsInteriorPointersOfItsBlocksOnly) {
  FakeHost host;
  PinnedPool pool(host);
  void* block = pool.allocate(1000);  // 1024 bytes
  EXPECT_TRUE(pool.contains(block));
  EXPECT_TRUE(pool.contains(as_bytes(block) + 1023));
  EXPECT_FALSE(pool.contains(as_bytes(block) + 1024));
  EXPECT_FALSE(pool.contains(as_bytes(block) - 1));
  int on_the_stack = 0;
  EXPECT_FALSE(pool.contains(&on_the_stack));
  pool.record_use(&on_the_stack, 0, kCopyStream);  // not ours: ignored
  EXPECT_TRUE(host.events.empty());
  pool.free(block);
  EXPECT_TRUE(pool.contains(block));  // cached blocks are still pinned memory
  EXPECT_KILN_ERROR(pool.record_use(block, 0, kCopyStream), "already freed");
  EXPECT_KILN_ERROR(pool.free(block), "did not hand out");
}

TEST(PinnedPool, StatisticsAndEmptyCache) {
  FakeHost host;
  PinnedPool pool(host);
  void* a = pool.allocate(1000);
  void* b = pool.allocate(5000);
  PinnedStats stats = pool.stats();
  EXPECT_EQ(stats.allocated_bytes, 1024u + 8192u);
  EXPECT_EQ(stats.reserved_bytes, 1024u + 8192u);
  EXPECT_EQ(stats.host_allocs, 2);
  EXPECT_EQ(stats.cached_blocks, 0);
  pool.record_use(b, 0, kCopyStream);
  pool.free(a);
  pool.free(b);
  stats = pool.stats();
  EXPECT_EQ(stats.allocated_bytes, 0u);
  EXPECT_EQ(stats.cached_blocks, 2);
  pool.empty_cache();  // frees a; b waits for its copy
  stats = pool.stats();
  EXPECT_EQ(stats.reserved_bytes, 8192u);
  EXPECT_EQ(stats.host_frees, 1);
  EXPECT_EQ(stats.cached_blocks, 1);
  host.complete_events_on(kCopyStream);
  pool.empty_cache();
  EXPECT_EQ(pool.stats().reserved_bytes, 0u);
  EXPECT_TRUE(host.live().empty());
}

TEST(PinnedPool, OutOfPinnedMemoryReleasesTheCacheAndRetriesThenFails) {
  FakeHost host;
  host.capacity = 16 * 1024;
  PinnedPool pool(host);
  pool.free(pool.allocate(4096));   // cached
  void* big = pool.allocate(8192);     // 4096 + 8192 fit
  void* bigger = pool.allocate(5000);  // 8192 more: only after the cached 4096 go
  EXPECT_EQ(pool.stats().host_frees, 1);
  EXPECT_KILN_ERROR(pool.allocate(100000), "out of pinned host memory", "requested 100000 bytes", "16384 bytes allocated");
  pool.free(big);
  pool.free(bigger);
}

TEST(PinnedPool, DestroyingThePoolFreesEverything) {
  FakeHost host;
  {
    PinnedPool pool(host);
    pool.allocate(100);
    void* copied = pool.allocate(100000);
    pool.record_use(copied, 0, kCopyStream);
    pool.free(copied);
  }
  EXPECT_TRUE(host.live().empty());
  EXPECT_EQ(host.events_alive(), 0);
}

}  // namespace
}  // namespace kiln::cuda
