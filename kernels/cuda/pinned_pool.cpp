// The pinned allocator's bookkeeping (pinned_pool.h): size classes, blocks held back by
// the events of their asynchronous copies, the out-of-memory retry, statistics.
#include "kernels/cuda/pinned_pool.h"

#include <algorithm>
#include <bit>
#include <limits>

#include "core/error.h"

namespace kiln::cuda {

size_t pinned_size_class(size_t nbytes) { return std::max(std::bit_ceil(nbytes), size_t{512}); }

PinnedPool::~PinnedPool() {
  for (auto& [address, block] : blocks_) {
    for (EventId event : block.events) memory_.release_event(event);
    memory_.free(block.ptr);
  }
}

void* PinnedPool::allocate(size_t nbytes) {
  KILN_ASSERT(nbytes > 0, "zero-byte requests are answered before the pinned pool");
  std::lock_guard<std::mutex> lock(mutex_);
  if (nbytes > std::numeric_limits<size_t>::max() / 2) throw_out_of_memory(nbytes, nbytes);
  const size_t size = pinned_size_class(nbytes);
  process_pending();
  if (const auto it = free_.lower_bound({size, 0}); it != free_.end() && it->first == size) {
    Block& block = blocks_.at(it->second);
    free_.erase(it);
    block.allocated = true;
    stats_.allocated_bytes += size;
    return block.ptr;
  }
  void* ptr = memory_.alloc(size);
  if (ptr == nullptr) {  // out of pinnable memory: give back what the cache holds, once
    release_free_blocks();
    ptr = memory_.alloc(size);
    if (ptr == nullptr) throw_out_of_memory(nbytes, size);
  }
  const auto address = reinterpret_cast<std::uintptr_t>(ptr);
  blocks_.emplace(address, Block{.ptr = static_cast<char*>(ptr), .size = size, .allocated = true, .events = {}});
  ++stats_.host_allocs;
  stats_.reserved_bytes += size;
  stats_.allocated_bytes += size;
  return ptr;
}

void PinnedPool::throw_out_of_memory(size_t nbytes, size_t size) {
  KILN_CHECK(false, "cuda: out of pinned host memory: requested ", nbytes, " bytes (a ", size,
             "-byte block); the pinned allocator has ", stats_.allocated_bytes, " bytes allocated and ",
             stats_.reserved_bytes, " bytes reserved. HINT: fewer loader workers or a smaller prefetch_factor "
             "pin less memory.");
  __builtin_unreachable();
}

void PinnedPool::free(void* ptr) {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = blocks_.find(reinterpret_cast<std::uintptr_t>(ptr));
  KILN_CHECK(it != blocks_.end() && it->second.allocated, "cuda: freeing ", ptr,
             ", which the pinned allocator did not hand out (or which was freed already)");
  Block& block = it->second;
  block.allocated = false;
  stats_.allocated_bytes -= block.size;
  drop_completed_events(block);
  if (block.events.empty()) {
    free_.emplace(block.size, it->first);
  } else {
    pending_.push_back(&block);
  }
}

void PinnedPool::drop_completed_events(Block& block) {
  std::erase_if(block.events, [&](EventId event) {
    if (!memory_.event_completed(event)) return false;
    memory_.release_event(event);
    return true;
  });
}

// Moves the freed blocks whose uses have all completed to the free set.
void PinnedPool::process_pending() {
  std::erase_if(pending_, [&](Block* block) {
    drop_completed_events(*block);
    if (!block->events.empty()) return false;
    free_.emplace(block->size, reinterpret_cast<std::uintptr_t>(block->ptr));
    return true;
  });
}

PinnedPool::Block* PinnedPool::block_containing(const void* ptr) {
  const auto address = reinterpret_cast<std::uintptr_t>(ptr);
  auto it = blocks_.upper_bound(address);  // the first block starting after ptr
  if (it == blocks_.begin()) return nullptr;
  --it;
  return address < it->first + it->second.size ? &it->second : nullptr;
}

bool PinnedPool::contains(const void* ptr) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return const_cast<PinnedPool*>(this)->block_containing(ptr) != nullptr;
}

void PinnedPool::record_use(const void* ptr, int device, StreamId stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  Block* block = block_containing(ptr);
  if (block == nullptr) return;
  KILN_CHECK(block->allocated, "cuda: record_host_use of ", ptr, ", a pinned block that was already freed");
  drop_completed_events(*block);
  block->events.push_back(memory_.record_event(device, stream));
}

void PinnedPool::empty_cache() {
  std::lock_guard<std::mutex> lock(mutex_);
  process_pending();
  release_free_blocks();
}

void PinnedPool::release_free_blocks() {
  for (const auto& [size, address] : free_) {
    memory_.free(blocks_.at(address).ptr);
    blocks_.erase(address);
    ++stats_.host_frees;
    stats_.reserved_bytes -= size;
  }
  free_.clear();
}

PinnedStats PinnedPool::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  PinnedStats stats = stats_;
  stats.cached_blocks = static_cast<int64_t>(free_.size() + pending_.size());
  return stats;
}

}  // namespace kiln::cuda
