// The pool of small blocks (core/pooled.h, Note [Pooled small blocks]): a freed block is
// handed out again for its size, every block is 16-byte aligned and holds what is written
// into it, a block may go back on another thread, large requests pass through, the lists
// are capped, and a thread's lists go when it ends. Under AddressSanitizer (or with
// KILN_CPU_NO_CACHING=1) the pool is a pass-through, and the reuse expectations are skipped
// there with that reason.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <set>
#include <thread>
#include <vector>

#include "core/pooled.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

// Under AddressSanitizer or KILN_CPU_NO_CACHING=1 every block is its own (pooling_enabled()).
const bool kPassThrough = !pooling_enabled();
const char* const kWhyNoReuse =
    "the pool is a pass-through (AddressSanitizer, or KILN_CPU_NO_CACHING=1), so blocks are not reused";

TEST(PooledBlocks, AFreedBlockIsHandedOutAgainForItsSize) {
  if (kPassThrough) GTEST_SKIP() << kWhyNoReuse;
  void* a = pooled_allocate(40);
  pooled_free(a, 40);
  void* b = pooled_allocate(48);  // the same 16-byte size class
  EXPECT_EQ(a, b);
  void* c = pooled_allocate(100);  // another class: another block
  EXPECT_NE(c, b);
  pooled_free(b, 48);
  pooled_free(c, 100);
}

TEST(PooledBlocks, BlocksAreAlignedAndHoldTheirBytes) {
  std::vector<std::pair<unsigned char*, size_t>> blocks;
  for (size_t bytes = 1; bytes <= kMaxPooledBytes + 64; bytes += 7) {
    auto* block = static_cast<unsigned char*>(pooled_allocate(bytes));
    ASSERT_NE(block, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(block) % 16, 0u) << bytes << " bytes";
    std::memset(block, static_cast<int>(bytes & 0xFF), bytes);
    blocks.emplace_back(block, bytes);
  }
  for (const auto& [block, bytes] : blocks) {
    for (size_t i = 0; i < bytes; ++i) ASSERT_EQ(block[i], static_cast<unsigned char>(bytes & 0xFF)) << bytes;
    pooled_free(block, bytes);
  }
}

TEST(PooledBlocks, ABlockMayGoBackOnAnotherThreadAndIsReusedThere) {
  std::vector<void*> made;
  for (int i = 0; i < 16; ++i) made.push_back(pooled_allocate(64));
  std::set<void*> reused;
  std::thread([&] {
    for (void* block : made) pooled_free(block, 64);  // into this thread's list
    for (int i = 0; i < 16; ++i) reused.insert(pooled_allocate(64));
    for (void* block : reused) pooled_free(block, 64);
  }).join();  // the thread's lists are freed as it ends
  if (kPassThrough) GTEST_SKIP() << kWhyNoReuse;
  EXPECT_EQ(reused, std::set<void*>(made.begin(), made.end()));
}

TEST(PooledBlocks, ListsAreCappedAndLargeRequestsPassThrough) {
  std::vector<void*> blocks;
  for (int i = 0; i < kMaxPooledPerSize + 100; ++i) blocks.push_back(pooled_allocate(32));
  for (void* block : blocks) pooled_free(block, 32);  // the last 100 go back to delete
  void* large = pooled_allocate(kMaxPooledBytes + 1);
  pooled_free(large, kMaxPooledBytes + 1);
  pooled_free(nullptr, 32);  // as delete, a null is nothing
  void* empty = pooled_allocate(0);
  EXPECT_NE(empty, nullptr);
  pooled_free(empty, 0);
}

TEST(PooledBlocks, SharedObjectsAndContainersUseThePool) {
  struct Tracked {
    int value;
    explicit Tracked(int v) : value(v) {}
  };
  const std::shared_ptr<Tracked> shared = make_pooled<Tracked>(7);
  EXPECT_EQ(shared->value, 7);
  std::vector<int64_t, PooledAllocator<int64_t>> list;
  for (int64_t i = 0; i < 100; ++i) list.push_back(i);  // grows past the pooled sizes too
  EXPECT_EQ(list[99], 99);
  EXPECT_TRUE(PooledAllocator<int>{} == PooledAllocator<double>{});
}

}  // namespace
}  // namespace kiln
