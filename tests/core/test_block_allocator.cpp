// The caching allocators' bookkeeping (BlockAllocator, core/block_allocator.h) on a fake
// device, so every rule runs in every build: size rounding and pools, reuse, splitting, merging, per-stream
// pools, blocks used on other streams, the out-of-memory retry and error, statistics,
// empty_cache, the no-caching switch, and threads. The real memories are tested in
// test_cpu_allocator.cpp and tests/cuda/internal/test_cuda_allocator.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "core/block_allocator.h"
#include "tests/core/fake_device_memory.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

using testing::FakeDevice;
using testing::as_bytes;
using testing::kMiB;

constexpr StreamId kStreamA = 0;  // the default stream
constexpr StreamId kStreamB = 0x1000;

TEST(BlockAllocator, SizesRoundToBlocksAndSegments) {
  EXPECT_EQ(round_size(1), 512u);
  EXPECT_EQ(round_size(512), 512u);
  EXPECT_EQ(round_size(513), 1024u);
  EXPECT_EQ(round_size(kMiB + 1), kMiB + 512);
  EXPECT_TRUE(is_small(kMiB));
  EXPECT_FALSE(is_small(kMiB + 512));
  EXPECT_EQ(segment_size(512), 2 * kMiB);
  EXPECT_EQ(segment_size(kMiB), 2 * kMiB);
  EXPECT_EQ(segment_size(kMiB + 512), 20 * kMiB);
  EXPECT_EQ(segment_size(10 * kMiB - 512), 20 * kMiB);
  EXPECT_EQ(segment_size(10 * kMiB), 10 * kMiB);
  EXPECT_EQ(segment_size(11 * kMiB + 512), 12 * kMiB);
}

TEST(BlockAllocator, SmallAndLargeRequestsComeFromSeparatePools) {
  FakeDevice device;
  BlockAllocator allocator(Device::cuda(0), device);
  void* small = allocator.allocate(1000, kStreamA);
  EXPECT_EQ(device.mallocs, 1);
  EXPECT_EQ(device.live().begin()->second, 2 * kMiB);
  // The small segment has room, but a large request never takes from the small pool.
  void* large = allocator.allocate(2 * kMiB, kStreamA);
  EXPECT_EQ(device.mallocs, 2);
  EXPECT_EQ(allocator.stats().reserved_bytes, 22 * kMiB);
  // Both pools serve later requests from their segments' remainders.
  void* small2 = allocator.allocate(kMiB, kStreamA);
  void* large2 = allocator.allocate(5 * kMiB, kStreamA);
  EXPECT_EQ(device.mallocs, 2);
  EXPECT_EQ(as_bytes(small2), as_bytes(small) + 1024);
  EXPECT_EQ(as_bytes(large2), as_bytes(large) + 2 * kMiB);
  for (void* ptr : {small, large, small2, large2}) allocator.free(ptr);
}

TEST(BlockAllocator, BlocksAreAlignedTo512Bytes) {
  FakeDevice device;
  BlockAllocator allocator(Device::cuda(0), device);
  std::vector<void*> blocks;
  for (size_t nbytes : {1, 17, 513, 1000, 4097, 100000}) blocks.push_back(allocator.allocate(nbytes, kStreamA));
  for (void* ptr : blocks) EXPECT_EQ(reinterpret_cast<std::uintptr_t>(ptr) % 512, 0u);
  for (void* ptr : blocks) allocator.free(ptr);
}

TEST(BlockAllocator, AFreedBlockIsReusedWithoutANewMalloc) {
  FakeDevice device;
  BlockAllocator allocator(Device::cuda(0), device);
  void* first = allocator.allocate(4096, kStreamA);
  allocator.free(first);
  void* second = allocator.allocate(4000, kStreamA);  // rounds to the same size
  EXPECT_EQ(second, first);
  EXPECT_EQ(device.mallocs, 1);
  EXPECT_EQ(allocator.stats().device_mallocs, 1);
  allocator.free(second);
}

TEST(BlockAllocator, ALargeCachedBlockIsSplitAndTheRemainderStaysCached) {
  FakeDevice device;
  BlockAllocator allocator(Device::cuda(0), device);
  void* big = allocator.allocate(40 * kMiB, kStreamA);
  allocator.free(big);
  void* front = allocator.allocate(8 * kMiB, kStreamA);
  EXPECT_EQ(front, big);
  void* back = allocator.allocate(30 * kMiB, kStreamA);  // from the 32 MiB remainder
  EXPECT_EQ(as_bytes(back), as_bytes(big) + 8 * kMiB);
  EXPECT_EQ(device.mallocs, 1);
  EXPECT_EQ(allocator.stats().allocated_bytes, 38 * kMiB);
  allocator.free(front);
  allocator.free(back);
}

TEST(BlockAllocator, AdjacentFreeBlocksMergeSoALargerRequestFits) {
  FakeDevice device;
  BlockAllocator allocator(Device::cuda(0), device);
  void* a = allocator.allocate(512 * 1024, kStreamA);
  void* b = allocator.allocate(512 * 1024, kStreamA);
  void* c = allocator.allocate(512 * 1024, kStreamA);
  EXPECT_EQ(as_bytes(b), as_bytes(a) + 512 * 1024);
  EXPECT_EQ(as_bytes(c), as_bytes(b) + 512 * 1024);
  allocator.free(a);
  allocator.free(c);  // merges with the segment's free tail
  EXPECT_EQ(allocator.stats().cached_blocks, 2);
  allocator.free(b);  // joins both neighbours: one block, the whole segment
  EXPECT_EQ(allocator.stats().cached_blocks, 1);
  void* whole = allocator.allocate(kMiB, kStreamA);
  EXPECT_EQ(whole, a);
  void* rest = allocator.allocate(kMiB, kStreamA);
  EXPECT_EQ(as_bytes(rest), as_bytes(a) + kMiB);
  EXPECT_EQ(device.mallocs, 1);
  allocator.free(whole);
  allocator.free(rest);
}

TEST(BlockAllocator, ABlockFreedOnOneStreamIsNotHandedToAnother) {
  FakeDevice device;
  BlockAllocator allocator(Device::cuda(0), device);
  void* on_a = allocator.allocate(4096, kStreamA);
  allocator.free(on_a);
  void* on_b = allocator.allocate(4096, kStreamB);
  EXPECT_NE(on_b, on_a);
  EXPECT_EQ(device.mallocs, 2);
  EXPECT_EQ(allocator.allocate(4096, kStreamA), on_a);
  allocator.free(on_a);
  allocator.free(on_b);
}

TEST(BlockAllocator, ABlockUsedOnAnotherStreamWaitsForThatStreamsEvent) {
  FakeDevice device;
  BlockAllocator allocator(Device::cuda(0), device);
  void* block = allocator.allocate(4096, kStreamA);
  allocator.record_stream(block, kStreamB);
  allocator.record_stream(block, kStreamB);  // recorded once
  allocator.record_stream(block, kStreamA);  // its own stream: nothing to do
  allocator.free(block);
  ASSERT_EQ(device.events.size(), 1u);
  EXPECT_EQ(device.events[0].stream, kStreamB);
  EXPECT_EQ(allocator.stats().allocated_bytes, 4096u);  // counts until the event completes
  EXPECT_EQ(allocator.stats().active_blocks, 1);

  void* while_pending = allocator.allocate(4096, kStreamA);
  EXPECT_NE(while_pending, block);
  void* still_pending = allocator.allocate(4096, kStreamA);
  EXPECT_NE(still_pending, block);

  device.complete_events_on(kStreamB);
  void* after = allocator.allocate(4096, kStreamA);
  EXPECT_EQ(after, block);
  EXPECT_EQ(device.events_alive(), 0);
  EXPECT_EQ(device.mallocs, 1);
  for (void* ptr : {while_pending, still_pending, after}) allocator.free(ptr);
  EXPECT_EQ(device.events.size(), 1u);  // no stream use recorded for the reused block
}

// A device with room for one 20 MiB segment and one 1 MiB more: a cached 2 MiB small
// segment must be released before a 20 MiB one fits.
struct NearlyFullDevice {
  NearlyFullDevice() { device.capacity = 21 * kMiB; }
  FakeDevice device;
  BlockAllocator allocator{Device::cuda(0), device};
};

TEST(BlockAllocator, OutOfMemoryReleasesTheCacheAndRetries) {
  NearlyFullDevice full;
  auto& [device, allocator] = full;
  allocator.free(allocator.allocate(1000, kStreamA));  // a cached 2 MiB segment
  void* large = allocator.allocate(5 * kMiB, kStreamA);  // 20 MiB: fits only without it
  const AllocatorStats stats = allocator.stats();
  EXPECT_EQ(stats.oom_retries, 1);
  EXPECT_EQ(stats.ooms, 0);
  EXPECT_EQ(stats.device_frees, 1);
  EXPECT_EQ(stats.reserved_bytes, 20 * kMiB);
  EXPECT_EQ(device.in_use(), 20 * kMiB);
  allocator.free(large);
}

TEST(BlockAllocator, OutOfMemoryRetryWaitsForBlocksHeldByEvents) {
  NearlyFullDevice full;
  auto& [device, allocator] = full;
  void* block = allocator.allocate(1000, kStreamA);
  allocator.record_stream(block, kStreamB);
  allocator.free(block);
  void* large = allocator.allocate(5 * kMiB, kStreamA);
  EXPECT_EQ(device.waits, 1);
  EXPECT_EQ(device.events_alive(), 0);
  EXPECT_EQ(allocator.stats().reserved_bytes, 20 * kMiB);
  allocator.free(large);
}

TEST(BlockAllocator, OutOfMemoryTwiceIsAnErrorWithTheNumbers) {
  NearlyFullDevice full;
  auto& [device, allocator] = full;
  void* held = allocator.allocate(1000, kStreamA);  // keeps its segment in use
  EXPECT_KILN_ERROR(allocator.allocate(5 * kMiB, kStreamA), "out of memory on cuda:0", "requested 5242880 bytes (5.0 MiB)",
                    "1024 bytes (1.0 KiB) allocated", "2097152 bytes (2.0 MiB) reserved", "free of 22020096 bytes");
  AllocatorStats stats = allocator.stats();
  EXPECT_EQ(stats.oom_retries, 1);
  EXPECT_EQ(stats.ooms, 1);
  EXPECT_EQ(stats.allocated_bytes, 1024u);
  // Still usable afterwards.
  void* small = allocator.allocate(1000, kStreamA);
  EXPECT_NE(small, nullptr);
  allocator.free(small);
  allocator.free(held);
  EXPECT_KILN_ERROR(allocator.allocate(size_t{1} << 50, kStreamA), "requested 1125899906842624 bytes (1.0 PiB)");
  EXPECT_KILN_ERROR(allocator.allocate(~size_t{0}, kStreamA), "out of memory");
}

TEST(BlockAllocator, StatisticsFollowAllocationsAndPeaks) {
  FakeDevice device;
  BlockAllocator allocator(Device::cuda(0), device);
  void* a = allocator.allocate(1000, kStreamA);
  void* b = allocator.allocate(3 * kMiB, kStreamA);
  AllocatorStats stats = allocator.stats();
  EXPECT_EQ(stats.allocated_bytes, 1024 + 3 * kMiB);
  EXPECT_EQ(stats.requested_bytes, 1000 + 3 * kMiB);
  EXPECT_EQ(stats.reserved_bytes, 22 * kMiB);
  EXPECT_EQ(stats.active_blocks, 2);
  EXPECT_EQ(stats.cached_blocks, 2);  // the remainders of both segments
  EXPECT_EQ(stats.device_mallocs, 2);
  allocator.free(b);
  stats = allocator.stats();
  EXPECT_EQ(stats.allocated_bytes, 1024u);
  EXPECT_EQ(stats.requested_bytes, 1000u);
  EXPECT_EQ(stats.peak_allocated_bytes, 1024 + 3 * kMiB);
  EXPECT_EQ(stats.peak_reserved_bytes, 22 * kMiB);
  allocator.reset_peak_stats();
  stats = allocator.stats();
  EXPECT_EQ(stats.peak_allocated_bytes, 1024u);
  EXPECT_EQ(stats.peak_reserved_bytes, 22 * kMiB);
  allocator.free(a);
  allocator.empty_cache();
  allocator.reset_peak_stats();
  stats = allocator.stats();
  EXPECT_EQ(stats.allocated_bytes, 0u);
  EXPECT_EQ(stats.reserved_bytes, 0u);
  EXPECT_EQ(stats.peak_reserved_bytes, 0u);
  EXPECT_EQ(stats.device_frees, 2);
}

TEST(BlockAllocator, EmptyCacheReleasesOnlyUnusedSegments) {
  FakeDevice device;
  BlockAllocator allocator(Device::cuda(0), device);
  void* unused = allocator.allocate(40 * kMiB, kStreamA);
  void* used = allocator.allocate(1000, kStreamA);
  void* pending = allocator.allocate(30 * kMiB, kStreamA);
  allocator.record_stream(pending, kStreamB);
  allocator.free(unused);
  allocator.free(pending);
  allocator.empty_cache();
  EXPECT_EQ(device.frees, 1);
  EXPECT_EQ(allocator.stats().reserved_bytes, 2 * kMiB + 30 * kMiB);
  EXPECT_FALSE(device.live().contains(reinterpret_cast<std::uintptr_t>(unused)));
  device.complete_events_on(kStreamB);
  allocator.empty_cache();
  EXPECT_EQ(allocator.stats().reserved_bytes, 2 * kMiB);
  allocator.free(used);
  allocator.empty_cache();
  EXPECT_TRUE(device.live().empty());
}

TEST(BlockAllocator, WithoutCachingEveryBlockIsItsOwnMalloc) {
  FakeDevice device;
  BlockAllocator allocator(Device::cuda(0), device, /*caching=*/false);
  EXPECT_FALSE(allocator.caching());
  void* a = allocator.allocate(1000, kStreamA);
  EXPECT_EQ(device.live().at(reinterpret_cast<std::uintptr_t>(a)), 1000u);  // exact bounds
  allocator.record_stream(a, kStreamB);
  allocator.free(a);
  EXPECT_EQ(device.frees, 1);
  EXPECT_TRUE(device.events.empty());
  void* b = allocator.allocate(1000, kStreamA);
  EXPECT_EQ(device.mallocs, 2);
  const AllocatorStats stats = allocator.stats();
  EXPECT_EQ(stats.allocated_bytes, 1000u);
  EXPECT_EQ(stats.reserved_bytes, 1000u);
  EXPECT_EQ(stats.device_mallocs, 2);
  EXPECT_EQ(stats.device_frees, 1);
  allocator.free(b);
  EXPECT_TRUE(device.live().empty());
  device.capacity = 10;
  EXPECT_KILN_ERROR(allocator.allocate(1000, kStreamA), "out of memory", "requested 1000 bytes");
}

TEST(BlockAllocator, TheEnvironmentSwitchIsParsedLikeAFlag) {
  EXPECT_FALSE(no_caching_requested(nullptr));
  EXPECT_FALSE(no_caching_requested(""));
  EXPECT_FALSE(no_caching_requested("0"));
  EXPECT_FALSE(no_caching_requested("false"));
  EXPECT_TRUE(no_caching_requested("1"));
  EXPECT_TRUE(no_caching_requested("yes"));
}

TEST(BlockAllocator, FreeingAPointerItDidNotHandOutIsAnError) {
  FakeDevice device;
  BlockAllocator allocator(Device::cuda(0), device);
  void* block = allocator.allocate(100, kStreamA);
  EXPECT_TRUE(allocator.owns(block));
  EXPECT_FALSE(allocator.owns(as_bytes(block) + 512));
  allocator.free(block);
  EXPECT_FALSE(allocator.owns(block));
  EXPECT_KILN_ERROR(allocator.free(block), "did not hand out");
  EXPECT_KILN_ERROR(allocator.record_stream(block, kStreamB), "record_stream");
}

TEST(BlockAllocator, DestroyingTheAllocatorGivesEverythingBack) {
  FakeDevice device;
  {
    BlockAllocator allocator(Device::cuda(0), device);
    allocator.allocate(100, kStreamA);
    void* pending = allocator.allocate(3 * kMiB, kStreamA);
    allocator.record_stream(pending, kStreamB);
    allocator.free(pending);
    allocator.free(allocator.allocate(50 * kMiB, kStreamB));
  }
  EXPECT_TRUE(device.live().empty());
  EXPECT_EQ(device.events_alive(), 0);
}

// Threads allocate and free concurrently on their own and on shared streams; no two live
// blocks may ever overlap, and everything adds up at the end.
TEST(BlockAllocator, ThreadsAllocateAndFreeSafely) {
  FakeDevice device;
  BlockAllocator allocator(Device::cuda(0), device);
  std::mutex live_mutex;
  std::map<std::uintptr_t, size_t> live;  // checked outside the allocator's lock
  auto claim = [&](void* ptr, size_t size) {
    std::lock_guard<std::mutex> lock(live_mutex);
    const auto address = reinterpret_cast<std::uintptr_t>(ptr);
    auto next = live.lower_bound(address);
    if (next != live.end() && next->first < address + size) return false;
    if (next != live.begin() && std::prev(next)->first + std::prev(next)->second > address) return false;
    live.emplace(address, size);
    return true;
  };
  auto unclaim = [&](void* ptr) {
    std::lock_guard<std::mutex> lock(live_mutex);
    live.erase(reinterpret_cast<std::uintptr_t>(ptr));
  };
  std::atomic<int> overlaps{0};
  auto worker = [&](int seed) {
    std::mt19937 random(static_cast<unsigned>(seed));
    std::vector<void*> mine;
    for (int step = 0; step < 3000; ++step) {
      if (mine.empty() || random() % 3 != 0) {
        const size_t nbytes = random() % 2 == 0 ? 1 + random() % 100000 : 1 + random() % (12 * kMiB);
        const StreamId stream = random() % 2 == 0 ? kStreamA : kStreamB + static_cast<StreamId>(seed);
        void* ptr = allocator.allocate(nbytes, stream);
        if (!claim(ptr, nbytes)) ++overlaps;
        mine.push_back(ptr);
        if (mine.size() > 20) {
          unclaim(mine.front());
          allocator.free(mine.front());
          mine.erase(mine.begin());
        }
      } else {
        const size_t i = random() % mine.size();
        unclaim(mine[i]);
        allocator.free(mine[i]);
        mine.erase(mine.begin() + static_cast<std::ptrdiff_t>(i));
      }
      if (step % 500 == 0) allocator.empty_cache();
    }
    for (void* ptr : mine) {
      unclaim(ptr);
      allocator.free(ptr);
    }
  };
  std::vector<std::thread> threads;
  for (int seed = 1; seed <= 4; ++seed) threads.emplace_back(worker, seed);
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(overlaps.load(), 0);
  const AllocatorStats stats = allocator.stats();
  EXPECT_EQ(stats.allocated_bytes, 0u);
  EXPECT_EQ(stats.requested_bytes, 0u);
  EXPECT_EQ(stats.active_blocks, 0);
  EXPECT_EQ(stats.reserved_bytes, device.in_use());
  allocator.empty_cache();
  EXPECT_TRUE(device.live().empty());
}

}  // namespace
}  // namespace kiln
