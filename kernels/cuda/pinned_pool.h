// PinnedPool: the bookkeeping of the pinned host allocator, with no CUDA in it.
//
// pinned_allocator.h says what the allocator does; this class does it through the small
// HostMemory interface below, so the rules are tested on the host with a fake
// (tests/cuda/internal/test_pinned_allocator.cpp); pinned_allocator.cpp plugs in
// cudaHostAlloc, cudaFreeHost and the allocators' event pool (event_pool.h).
//
// Blocks are whole allocations whose sizes are powers of two (at least 512 bytes); a
// free block is reused for a request of the same size class. A block carries the events
// recorded by record_use (asynchronous copies reading or writing it); when it is freed
// with events still running it waits in `pending_`, and joins the free blocks only once
// they have all completed. Completed events are dropped as soon as they are seen, so a
// long-lived staging buffer used by many copies does not collect events.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <utility>
#include <vector>

#include "kernels/cuda/allocator_stats.h"
#include "core/block_allocator.h"

namespace kiln::cuda {

// What the pinned pool needs from the host and devices. alloc returns nullptr when the
// memory cannot be pinned (any other failure throws).
class HostMemory {
 public:
  virtual ~HostMemory() = default;
  virtual void* alloc(size_t nbytes) = 0;
  virtual void free(void* ptr) = 0;
  virtual EventId record_event(int device, StreamId stream) = 0;
  virtual bool event_completed(EventId event) = 0;
  virtual void release_event(EventId event) = 0;
};

// The size class of a request of `nbytes` (> 0): the next power of two, at least 512.
size_t pinned_size_class(size_t nbytes);

class PinnedPool {
 public:
  explicit PinnedPool(HostMemory& memory) : memory_(memory) {}
  ~PinnedPool();  // frees every block (the process-wide pool is never destroyed)
  PinnedPool(const PinnedPool&) = delete;
  PinnedPool& operator=(const PinnedPool&) = delete;

  // A pinned block of at least `nbytes` (> 0) bytes; a kiln::Error when it cannot be had.
  void* allocate(size_t nbytes);
  // Gives back a block from allocate(); reused once its recorded uses have completed.
  void free(void* ptr);
  // Whether `ptr` lies inside a block of this pool (handed out or cached).
  bool contains(const void* ptr) const;
  // The block holding `ptr` is used by work queued on `stream` of `device`. A pointer
  // outside the pool (memory pinned by someone else) is ignored: its owner decides.
  void record_use(const void* ptr, int device, StreamId stream);
  // Frees the cached blocks whose events have completed.
  void empty_cache();
  PinnedStats stats() const;

 private:
  struct Block {
    char* ptr;
    size_t size;
    bool allocated = false;
    std::vector<EventId> events;  // uses not known to have completed
  };

  Block* block_containing(const void* ptr);
  void drop_completed_events(Block& block);
  void process_pending();
  void release_free_blocks();
  [[noreturn]] void throw_out_of_memory(size_t nbytes, size_t size);

  HostMemory& memory_;
  mutable std::mutex mutex_;
  std::map<std::uintptr_t, Block> blocks_;           // every block, by address
  std::set<std::pair<size_t, std::uintptr_t>> free_;  // reusable now: (size, address)
  std::vector<Block*> pending_;                       // freed, events still running
  PinnedStats stats_;
};

}  // namespace kiln::cuda
