// BlockAllocator: the bookkeeping of a caching allocator, for any device, with no CUDA in
// it. Kiln's two caching allocators are this class with a different memory behind it:
//   - CUDA (kernels/cuda/caching_allocator.h says what it does): cudaMalloc, cudaFree and
//     pooled cudaEvents, one BlockAllocator per GPU;
//   - the CPU (core/allocator.cpp, Note [CPU caching allocator]): aligned host memory,
//     one stream, no events.
// It talks to the memory only through the small DeviceMemory interface below, so every
// rule (rounding, pools, best fit, splitting, merging, stream ownership, events,
// out-of-memory retry, statistics) is tested with a fake device
// (tests/core/test_block_allocator.cpp).
//
// Memory is held as segments (one DeviceMemory::malloc each), cut into blocks. The
// blocks of a segment form a doubly linked list in address order; a segment belongs to
// one pool (small or large) and one stream, and so do all its blocks. A free block sits
// in its pool's set, ordered by (stream, size, address): the best fit for a request is
// the first entry not less than (stream, size, 0), if it has the same stream.
//
// Note [Blocks used on other streams]: a block is handed out for work on its own stream,
// and a later allocation on that stream is ordered after that work, so reuse needs no
// synchronization. When a block is also used on another stream (record_stream), freeing
// it records one event on each such stream; the block waits in `pending_` and goes back
// to its pool (merging with its neighbours) only when all its events have completed. It
// counts as allocated until then.
//
// Note [Private pools]: a CUDA graph replays the addresses its capture allocated, so the
// memory a capture allocates must stay the graph's while the graph lives: no eager
// allocation may be handed a block of it, even one the capture freed again.
// begin_private_pool(stream, pool) sends every allocation for `stream` (the capturing
// stream) to `pool` until end_private_pool(stream). The pool's blocks, and the segments
// made for them, carry the pool's tag where a block carries its stream, so no stream's
// best-fit lookup ever meets them; a block freed during the capture goes back to the pool,
// where the same capture may take it again (the graph replays in capture order), and
// later captures into the same pool (another shape of the same step) share it. While any
// capture is under way the allocator neither queries events nor gives segments back
// (both are illegal during a capture: cudaEventQuery, and cudaFree, which synchronizes):
// a free that would record events on other streams waits for the capture's end, and
// running out of memory is an error that says a capture was under way.
// release_private_pool(pool), when the graph is destroyed (after its last replay), gives
// the pool's entirely free segments back to the device unless a capture is under way;
// its other segments (a tensor from the capture that outlived the graph) and those are
// given back when they are entirely free and the cache is emptied (empty_cache, or the
// out-of-memory retry), never from a tensor's deleter, where cudaFree's synchronization
// would be a hidden host sync. Nothing of a released pool is ever reused.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/allocator_stats.h"
#include "core/device.h"

namespace kiln {

// A stream as the bookkeeping sees it: its cudaStream_t as an integer (0 on the CPU).
using StreamId = std::uintptr_t;
// An event recorded by DeviceMemory::record_event (an opaque handle).
using EventId = std::uint64_t;
// A private pool (Note [Private pools]): any number but 0, unique per graph (or group of
// graphs that share memory).
using PoolId = std::uint64_t;

// What the block allocator needs from a device. malloc returns nullptr when the device
// is out of memory (any other failure throws).
class DeviceMemory {
 public:
  virtual ~DeviceMemory() = default;
  virtual void* malloc(size_t nbytes) = 0;
  virtual void free(void* ptr) = 0;
  // Records an event on `stream`; it completes when the work queued before it is done.
  virtual EventId record_event(StreamId stream) = 0;
  virtual bool event_completed(EventId event) = 0;
  // Blocks the host until `event` has completed.
  virtual void wait_event(EventId event) = 0;
  // The event is no longer needed (it may be reused).
  virtual void release_event(EventId event) = 0;
  // Free and total bytes of the device, for out-of-memory messages.
  virtual size_t free_bytes() = 0;
  virtual size_t total_bytes() = 0;
};

// The size rules (caching_allocator.h). All sizes are multiples of kMinBlockSize, so
// every block starts 512-byte aligned within its (at least 256-byte aligned) segment.
inline constexpr size_t kMinBlockSize = 512;                // rounding step
inline constexpr size_t kSmallSize = size_t{1} << 20;        // largest small-pool request
inline constexpr size_t kSmallSegment = size_t{2} << 20;     // small-pool segments
inline constexpr size_t kLargeBufferLimit = size_t{10} << 20;  // requests below: 20 MiB
inline constexpr size_t kLargeBuffer = size_t{20} << 20;     // segment for mid-size requests
inline constexpr size_t kLargeRounding = size_t{2} << 20;     // larger segments round to this

// The block size for a request of `nbytes` (> 0): a multiple of 512.
size_t round_size(size_t nbytes);
// Whether a (rounded) size is served by the small pool.
inline bool is_small(size_t rounded) { return rounded <= kSmallSize; }
// The segment size to malloc when no cached block fits a (rounded) size.
size_t segment_size(size_t rounded);
// Whether the value of KILN_CUDA_NO_CACHING or KILN_CPU_NO_CACHING (null when unset)
// turns caching off: any
// value but "", "0", "false", "no" and "off".
bool no_caching_requested(const char* env_value);

class BlockAllocator {
 public:
  // `caching` false: every allocation is its own malloc of exactly the requested size,
  // every free a DeviceMemory::free (KILN_CUDA_NO_CACHING=1).
  BlockAllocator(Device device, DeviceMemory& memory, bool caching = true);
  ~BlockAllocator();
  BlockAllocator(const BlockAllocator&) = delete;
  BlockAllocator& operator=(const BlockAllocator&) = delete;

  // A block of at least `nbytes` (> 0) bytes for work on `stream`. Throws kiln::Error
  // when the device is out of memory even after the cache has been released.
  void* allocate(size_t nbytes, StreamId stream);
  // Gives back a block from allocate(); it is reused for allocations on its stream (after
  // the events of Note [Blocks used on other streams]).
  void free(void* ptr);
  // Whether `ptr` is a block handed out by this allocator (and not yet freed).
  bool owns(void* ptr) const;
  // The block of `ptr` is also used by work on `stream` (ignored for its own stream).
  void record_stream(void* ptr, StreamId stream);

  // Note [Private pools]. A stream has at most one private pool at a time; pools and
  // redirections are per allocator (per device); a caching allocator is needed.
  void begin_private_pool(StreamId stream, PoolId pool);
  void end_private_pool(StreamId stream);
  void release_private_pool(PoolId pool);
  // Bytes of the segments `pool` holds now (for statistics and tests).
  size_t private_pool_reserved_bytes(PoolId pool) const;
  // Whether a capture is under way (a private pool is active for some stream).
  bool capture_under_way() const;

  // Releases every segment with no block in use (and none waiting for events). An error
  // while a capture is under way.
  void empty_cache();
  AllocatorStats stats() const;
  void reset_peak_stats();
  bool caching() const { return caching_; }
  Device device() const { return device_; }

 private:
  struct Block;
  struct BySize {
    bool operator()(const Block* a, const Block* b) const;
  };
  using Pool = std::set<Block*, BySize>;

  StreamId owner_for(StreamId stream) const;
  void free_segment(Pool& pool, Block* block);
  void record_uses_and_hold(Block* block);
  Block* take_cached(Pool& pool, size_t size, StreamId stream);
  Block* new_segment(size_t size, size_t requested, StreamId stream, bool small);
  void* malloc_or_retry(size_t bytes, size_t requested);
  [[noreturn]] void throw_out_of_memory(size_t requested, size_t segment);
  Block* split(Block* block, size_t size);
  void hand_out(Block* block, size_t requested);
  void return_to_pool(Block* block);
  void process_events(bool wait);
  void release_unused_segments();
  Pool& pool_of(const Block* block);
  void* allocate_uncached(size_t nbytes);
  void free_uncached(void* ptr);

  const Device device_;
  DeviceMemory& memory_;
  const bool caching_;
  mutable std::mutex mutex_;
  Pool small_pool_;
  Pool large_pool_;
  std::unordered_map<void*, Block*> active_;  // handed out, by address
  struct Pending {
    Block* block;
    std::vector<EventId> events;
  };
  std::vector<Pending> pending_;  // freed, waiting for events of other streams
  std::vector<std::pair<StreamId, StreamId>> redirects_;  // capturing stream -> its pool's tag
  std::vector<Block*> freed_during_capture_;  // with uses on other streams: events after it
  std::vector<StreamId> released_pools_;      // tags of pools whose graph is gone
  std::unordered_map<void*, size_t> uncached_;  // caching off: address -> requested bytes
  AllocatorStats stats_;
};

}  // namespace kiln
