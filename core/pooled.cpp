// The pool of small blocks (pooled.h, Note [Pooled small blocks]): per thread, one free list
// per 16-byte size, capped; a pass-through under AddressSanitizer and KILN_CPU_NO_CACHING=1.
#include "core/pooled.h"

#include <cstdlib>
#include <new>

#include "core/block_allocator.h"

#if defined(__SANITIZE_ADDRESS__)
#define KILN_POOL_PASS_THROUGH 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KILN_POOL_PASS_THROUGH 1
#endif
#endif

namespace kiln {

#if defined(KILN_POOL_PASS_THROUGH)

void* pooled_allocate(size_t bytes) { return ::operator new(bytes); }
void pooled_free(void* block, size_t /*bytes*/) noexcept { ::operator delete(block); }
bool pooling_enabled() { return false; }

#else

namespace {

constexpr size_t kGranule = 16;
constexpr size_t kSizes = kMaxPooledBytes / kGranule;

struct FreeBlock {
  FreeBlock* next;
};

// One thread's lists. Its destructor (at thread exit) frees them and marks the thread's
// pool gone, so blocks freed later bypass it.
struct ThreadLists {
  FreeBlock* head[kSizes] = {};
  int count[kSizes] = {};
  ~ThreadLists();
};

thread_local bool t_gone = false;  // trivially destructible: readable until the thread ends
thread_local ThreadLists t_lists;

ThreadLists::~ThreadLists() {
  for (size_t size = 0; size < kSizes; ++size) {
    while (FreeBlock* block = head[size]) {
      head[size] = block->next;
      ::operator delete(block);
    }
    count[size] = 0;
  }
  t_gone = true;
}

// The list of blocks of `bytes` (1..kMaxPooledBytes): rounded up to the granule.
size_t size_index(size_t bytes) { return (bytes - 1) / kGranule; }

// KILN_CPU_NO_CACHING=1 (core/allocator.cpp) makes every CPU block its own allocation, for
// valgrind; the small blocks follow it. Read once: the pool must not change its mind while
// blocks are out.
bool pool_off() {
  static const bool off = no_caching_requested(std::getenv("KILN_CPU_NO_CACHING"));
  return off;
}

}  // namespace

bool pooling_enabled() { return !pool_off(); }

void* pooled_allocate(size_t bytes) {
  if (bytes == 0 || bytes > kMaxPooledBytes || pool_off()) return ::operator new(bytes);
  const size_t index = size_index(bytes);
  if (t_gone) return ::operator new((index + 1) * kGranule);
  ThreadLists& lists = t_lists;
  if (FreeBlock* block = lists.head[index]) {
    lists.head[index] = block->next;
    --lists.count[index];
    return block;
  }
  return ::operator new((index + 1) * kGranule);
}

void pooled_free(void* block, size_t bytes) noexcept {
  if (block == nullptr) return;
  if (bytes == 0 || bytes > kMaxPooledBytes || pool_off()) {
    ::operator delete(block);
    return;
  }
  const size_t index = size_index(bytes);
  if (t_gone) {
    ::operator delete(block);
    return;
  }
  ThreadLists& lists = t_lists;
  if (lists.count[index] >= kMaxPooledPerSize) {
    ::operator delete(block);
    return;
  }
  auto* free_block = static_cast<FreeBlock*>(block);
  free_block->next = lists.head[index];
  lists.head[index] = free_block;
  ++lists.count[index];
}

#endif

}  // namespace kiln
