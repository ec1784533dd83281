// The CPU allocator with its cache (Note [CPU caching allocator], core/allocator.cpp):
// blocks of 64 KiB and more are reused without a new allocation, counted in
// cpu_memory_stats, aligned, given back by empty_cpu_cache, and safe from many threads;
// smaller ones bypass the cache. The cache's rules themselves are tested on a fake memory
// in test_block_allocator.cpp. (Each test runs in its own process, so the statistics
// start from a fresh cache.)
#include <gtest/gtest.h>

#include <cstdint>
#include <thread>
#include <vector>

#include "core/allocator.h"
#include "core/ops.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

constexpr int64_t kLargeFloats = int64_t{1} << 20;  // 4 MiB: served by the cache

#define SKIP_WITHOUT_CPU_CACHE()                                                                   \
  if (!cpu_allocator_caching())                                                                    \
  GTEST_SKIP() << "the CPU cache is off (KILN_CPU_NO_CACHING is set, or this is an AddressSanitizer " \
                  "build, where it is off by design)"

TEST(CpuAllocator, AFreedLargeBlockIsReusedWithoutANewAllocation) {
  SKIP_WITHOUT_CPU_CACHE();
  const void* first_address = nullptr;
  {
    const Tensor t = empty({kLargeFloats});
    first_address = t.data_ptr();
  }
  const AllocatorStats before = cpu_memory_stats();
  const Tensor again = empty({kLargeFloats});
  const AllocatorStats after = cpu_memory_stats();
  EXPECT_EQ(again.data_ptr(), first_address);
  EXPECT_EQ(after.device_mallocs, before.device_mallocs);
  EXPECT_EQ(after.reserved_bytes, before.reserved_bytes);
}

TEST(CpuAllocator, StatisticsCountLargeBlocksAndTheirPeak) {
  SKIP_WITHOUT_CPU_CACHE();
  reset_peak_cpu_memory_stats();
  const AllocatorStats start = cpu_memory_stats();
  {
    const Tensor a = empty({kLargeFloats});
    const Tensor b = empty({kLargeFloats});
    const AllocatorStats during = cpu_memory_stats();
    EXPECT_EQ(during.allocated_bytes, start.allocated_bytes + 2 * 4 * kLargeFloats);
    EXPECT_EQ(during.requested_bytes, start.requested_bytes + 2 * 4 * kLargeFloats);
    EXPECT_EQ(during.active_blocks, start.active_blocks + 2);
    EXPECT_GE(during.reserved_bytes, during.allocated_bytes);
  }
  const AllocatorStats end = cpu_memory_stats();
  EXPECT_EQ(end.allocated_bytes, start.allocated_bytes);
  EXPECT_EQ(end.peak_allocated_bytes, start.allocated_bytes + 2 * 4 * kLargeFloats);
  EXPECT_GT(end.reserved_bytes, 0u);  // kept for the next step
}

// kiln::memory_stats(Device) is the device-agnostic face of the same numbers.
TEST(CpuAllocator, MemoryStatsOfTheCpuDeviceAreTheCaches) {
  SKIP_WITHOUT_CPU_CACHE();
  const Tensor a = empty({kLargeFloats});
  reset_peak_memory_stats(Device::cpu());
  EXPECT_EQ(memory_stats(Device::cpu()).peak_allocated_bytes, cpu_memory_stats().allocated_bytes);
  EXPECT_EQ(memory_stats(Device::cpu()).allocated_bytes, cpu_memory_stats().allocated_bytes);
  EXPECT_KILN_ERROR(memory_stats(Device{DeviceType::CPU, 1}), "one CPU device");
}

TEST(CpuAllocator, SmallTensorsBypassTheCache) {
  SKIP_WITHOUT_CPU_CACHE();
  const AllocatorStats before = cpu_memory_stats();
  const Tensor small = empty({1024});  // 4 KiB
  const AllocatorStats after = cpu_memory_stats();
  EXPECT_EQ(after.allocated_bytes, before.allocated_bytes);
  EXPECT_EQ(after.active_blocks, before.active_blocks);
}

TEST(CpuAllocator, EveryBlockIs64ByteAligned) {
  std::vector<Tensor> held;
  for (int64_t n : {int64_t{1}, int64_t{17}, int64_t{16385}, int64_t{16400}, int64_t{100000}, kLargeFloats + 3}) {
    held.push_back(empty({n}));
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(held.back().data_ptr()) % kCpuAlignment, 0u) << n;
  }
}

// Small blocks are aligned by hand inside a malloc'd chunk (Note [Small CPU blocks]): every
// size near the alignment, written to its last byte and freed, must keep the bookkeeping
// slot before the block intact (AddressSanitizer and glibc's free checks see the rest).
TEST(CpuAllocator, SmallBlocksOfEveryNearbySizeAreAlignedAndWritable) {
  std::vector<Tensor> held;
  for (int64_t n = 1; n <= 200; ++n) {
    held.push_back(full({n}, static_cast<uint8_t>(n), {.dtype = DType::UInt8}));
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(held.back().data_ptr()) % kCpuAlignment, 0u) << n;
  }
  for (int64_t n = 1; n <= 200; ++n) {
    const Tensor& t = held[static_cast<size_t>(n - 1)];
    EXPECT_EQ(t.data_ptr<uint8_t>()[n - 1], static_cast<uint8_t>(n)) << n;
  }
  held.clear();  // every free reads its slot back
}

TEST(CpuAllocator, EmptyCacheGivesUnusedBlocksBack) {
  SKIP_WITHOUT_CPU_CACHE();
  empty_cpu_cache();  // what earlier tests in this process left cached
  const AllocatorStats start = cpu_memory_stats();
  constexpr int64_t kOwnSegment = int64_t{3} << 20;  // 12 MiB: past 10 MiB, a segment of its own
  const Tensor kept = empty({kOwnSegment});
  { const Tensor freed = empty({kOwnSegment}); }  // a second segment, cached once freed
  const AllocatorStats before = cpu_memory_stats();
  EXPECT_EQ(before.reserved_bytes - start.reserved_bytes, size_t{24} << 20);
  empty_cpu_cache();
  const AllocatorStats after = cpu_memory_stats();
  EXPECT_EQ(after.allocated_bytes - start.allocated_bytes, size_t{12} << 20);
  EXPECT_EQ(after.reserved_bytes - start.reserved_bytes, size_t{12} << 20);  // the segment of `kept` only
  EXPECT_EQ(after.device_frees, before.device_frees + 1);
}

// Threads allocate, fill, check and free blocks of many sizes at once: no block is handed
// to two tensors (each thread's values survive), and everything comes back.
TEST(CpuAllocator, ThreadsAllocateAndFreeSafely) {
  const AllocatorStats start = cpu_memory_stats();
  std::vector<std::thread> threads;
  std::vector<int> failures(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([t, &failures] {
      for (int i = 0; i < 50; ++i) {
        const int64_t n = (int64_t{1} << 14) + (i % 7) * 40000 + t;
        const Tensor x = full({n}, static_cast<double>(t * 1000 + i), {.dtype = DType::Float64});
        const Tensor y = full({2 * n}, static_cast<double>(-t), {.dtype = DType::Float64});
        if (x.sum().item<double>() != static_cast<double>(n) * (t * 1000 + i)) ++failures[t];
        if (y.sum().item<double>() != -2.0 * static_cast<double>(n) * t) ++failures[t];
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(failures[t], 0) << "thread " << t;
  EXPECT_EQ(cpu_memory_stats().allocated_bytes, start.allocated_bytes);
}

}  // namespace
}  // namespace kiln
