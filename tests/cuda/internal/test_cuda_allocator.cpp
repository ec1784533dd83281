// The caching device allocator and the pinned host allocator on a real GPU (they skip
// without one; their bookkeeping is tested on fakes in test_caching_allocator.cpp and
// test_pinned_allocator.cpp). Each test works on streams of its own, so the blocks it
// sees are not blocks other tests left in the cache of the default stream (and empties
// the cache first, as a new stream may get the handle of a destroyed one), and checks
// the statistics as differences.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <vector>

#include "core/storage.h"
#include "kernels/cuda/caching_allocator.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/pinned_allocator.h"
#include "tests/cuda/cuda_test_util.h"
#include "tests/cuda/internal/busy_stream.h"

namespace kiln::cuda {
namespace {

using testing::BusyStream;

constexpr size_t kMiB = size_t{1} << 20;

// Tests of reuse need the cache (KILN_CUDA_NO_CACHING=1 turns it off).
#define KILN_REQUIRE_CACHING()                                                   \
  do {                                                                           \
    if (caching_disabled()) GTEST_SKIP() << "KILN_CUDA_NO_CACHING is set";        \
  } while (0)

// A device block on the calling thread's current stream of cuda:0, freed at scope exit.
Storage device_block(size_t nbytes) { return Storage::allocate(device_allocator(0), nbytes); }

// cuda:0 with an empty cache, for FreshStream's stream: a new stream may get the handle of
// a destroyed one, and with it the blocks cached for that one.
int device_with_empty_cache() {
  empty_cache();
  return 0;
}

// A new stream of cuda:0, current while the object lives, with no cached blocks of its own.
class FreshStream {
 public:
  FreshStream() : stream_(device_with_empty_cache()), current_(stream_) {}
  Stream stream() const { return stream_.stream(); }

 private:
  OwnedStream stream_;
  StreamGuard current_;
};

TEST(CudaAllocator, AFreedBlockIsReusedWithoutACudaMalloc) {
  KILN_REQUIRE_CUDA();
  KILN_REQUIRE_CACHING();
  const FreshStream stream;
  void* first = nullptr;
  {
    Storage block = device_block(kMiB);
    first = block.data();
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(first) % 512, 0u);
    KILN_CUDA_CHECK(cudaMemsetAsync(first, 0, kMiB, stream.stream().handle()));
  }
  const int64_t mallocs = memory_stats(0).device_mallocs;
  Storage again = device_block(kMiB - 100);
  EXPECT_EQ(again.data(), first);
  EXPECT_EQ(memory_stats(0).device_mallocs, mallocs);
  stream.stream().synchronize();
}

TEST(CudaAllocator, ALargeCachedBlockIsSplit) {
  KILN_REQUIRE_CUDA();
  KILN_REQUIRE_CACHING();
  const FreshStream stream;
  char* base = static_cast<char*>(device_block(40 * kMiB).data());
  const int64_t mallocs = memory_stats(0).device_mallocs;
  Storage front = device_block(8 * kMiB);
  Storage back = device_block(30 * kMiB);
  EXPECT_EQ(front.data(), base);
  EXPECT_EQ(back.data(), base + 8 * kMiB);
  EXPECT_EQ(memory_stats(0).device_mallocs, mallocs);
}

TEST(CudaAllocator, ZeroBytesAndBadDevices) {
  KILN_REQUIRE_CUDA();
  EXPECT_EQ(device_block(0).data(), nullptr);
  EXPECT_EQ(raw_allocate(0, current_stream(0)), nullptr);
  EXPECT_KILN_ERROR(device_allocator(cuda_device_count()), "out of range");
  EXPECT_KILN_ERROR(memory_stats(-1), "out of range");
  int not_ours = 0;
  EXPECT_KILN_ERROR(record_stream(&not_ours, current_stream(0)), "record_stream");
  EXPECT_KILN_ERROR(raw_free(&not_ours), "raw_free");
}

TEST(CudaAllocator, StatisticsCountBlocksAndPeaks) {
  KILN_REQUIRE_CUDA();
  KILN_REQUIRE_CACHING();
  const FreshStream stream;
  const AllocatorStats before = memory_stats(0);
  reset_peak_memory_stats(0);
  {
    Storage block = device_block(3 * kMiB + 1);
    const AllocatorStats during = memory_stats(0);
    EXPECT_EQ(during.allocated_bytes, before.allocated_bytes + 3 * kMiB + 512);
    EXPECT_EQ(during.requested_bytes, before.requested_bytes + 3 * kMiB + 1);
    EXPECT_EQ(during.active_blocks, before.active_blocks + 1);
    EXPECT_GE(during.reserved_bytes, during.allocated_bytes);
  }
  const AllocatorStats after = memory_stats(0);
  EXPECT_EQ(after.allocated_bytes, before.allocated_bytes);
  EXPECT_EQ(after.peak_allocated_bytes, before.allocated_bytes + 3 * kMiB + 512);
  empty_cache();
  EXPECT_LT(memory_stats(0).reserved_bytes, after.reserved_bytes);
  reset_peak_memory_stats(0);
  EXPECT_EQ(memory_stats(0).peak_allocated_bytes, memory_stats(0).allocated_bytes);
}

// A block written on stream B, and freed while that write is still queued, must not be
// handed to an allocation on stream A until the write is done.
TEST(CudaAllocator, ABlockUsedOnAnotherStreamIsNotReusedBeforeThatWorkFinishes) {
  KILN_REQUIRE_CUDA();
  KILN_REQUIRE_CACHING();
  const FreshStream stream_a;
  OwnedStream stream_b(0);
  Storage block = device_block(kMiB);
  void* used_on_b = block.data();
  std::vector<Storage> while_busy;  // held to the end, so `after` has one candidate
  {
    BusyStream busy(stream_b.stream().handle());
    KILN_CUDA_CHECK(cudaMemsetAsync(used_on_b, 1, kMiB, stream_b.stream().handle()));  // waits behind `busy`
    record_stream(used_on_b, stream_b);
    block = Storage();  // freed before the write has even started

    for (int i = 0; i < 3; ++i) {
      while_busy.push_back(device_block(kMiB));
      EXPECT_NE(while_busy.back().data(), used_on_b);
    }
  }  // releases stream B and waits for the write
  int32_t written = 0;
  KILN_CUDA_CHECK(cudaMemcpy(&written, used_on_b, sizeof(written), cudaMemcpyDeviceToHost));
  EXPECT_EQ(written, 0x01010101);
  Storage after = device_block(kMiB);
  EXPECT_EQ(after.data(), used_on_b);
}

TEST(CudaAllocator, OutOfMemoryIsAClearErrorAndTheAllocatorStillWorks) {
  KILN_REQUIRE_CUDA();
  OwnedStream stream(0);
  const AllocatorStats before = memory_stats(0);
  EXPECT_KILN_ERROR(raw_allocate(size_t{1} << 50, stream), "out of memory on cuda:0",
                    "requested 1125899906842624 bytes (1.0 PiB)", "allocated", "reserved", "free of");
  const AllocatorStats after = memory_stats(0);
  EXPECT_EQ(after.ooms, before.ooms + 1);
  EXPECT_EQ(after.allocated_bytes, before.allocated_bytes);
  void* ptr = raw_allocate(kMiB, stream);
  ASSERT_NE(ptr, nullptr);
  KILN_CUDA_CHECK(cudaMemsetAsync(ptr, 1, kMiB, stream.stream().handle()));
  stream.stream().synchronize();  // no error left behind by the failed cudaMalloc
  raw_free(ptr);
}

TEST(CudaAllocator, PinnedBlocksAreReusedOnlyAfterTheirCopiesFinish) {
  KILN_REQUIRE_CUDA();
  // Cached 1 MiB blocks of earlier tests in this process would be candidates for `after`.
  empty_pinned_cache();
  OwnedStream copy_stream(0);
  void* device = raw_allocate(kMiB, copy_stream);
  Storage pinned = Storage::allocate(pinned_host_allocator(), kMiB);
  void* host = pinned.data();
  EXPECT_TRUE(is_pinned(host));
  EXPECT_TRUE(is_pinned(static_cast<char*>(host) + kMiB - 1));
  std::vector<char> pageable(16);
  EXPECT_FALSE(is_pinned(pageable.data()));
  const int64_t allocs = pinned_stats().host_allocs;
  Storage while_copying;
  {
    // The copy waits behind `busy`, so it reads the block after the block is freed.
    BusyStream busy(copy_stream.stream().handle());
    KILN_CUDA_CHECK(cudaMemcpyAsync(device, host, kMiB, cudaMemcpyHostToDevice, copy_stream.stream().handle()));
    record_host_use(host, copy_stream);
    pinned = Storage();
    while_copying = Storage::allocate(pinned_host_allocator(), kMiB);
    EXPECT_NE(while_copying.data(), host);
  }  // releases the stream and waits for the copy
  Storage after = Storage::allocate(pinned_host_allocator(), kMiB);
  EXPECT_EQ(after.data(), host);
  EXPECT_LE(pinned_stats().host_allocs, allocs + 1);
  raw_free(device);
}

}  // namespace
}  // namespace kiln::cuda
