// The caching allocator's bookkeeping (block_allocator.h): pools, best fit, splitting,
// merging, events of other streams, the out-of-memory retry, statistics.
#include "core/block_allocator.h"

#include <algorithm>
#include <limits>
#include <tuple>

#include "core/error.h"
#include "core/human_bytes.h"

namespace kiln {

size_t round_size(size_t nbytes) {
  if (nbytes < kMinBlockSize) return kMinBlockSize;
  return (nbytes + kMinBlockSize - 1) / kMinBlockSize * kMinBlockSize;
}

size_t segment_size(size_t rounded) {
  if (is_small(rounded)) return kSmallSegment;
  if (rounded < kLargeBufferLimit) return kLargeBuffer;
  return (rounded + kLargeRounding - 1) / kLargeRounding * kLargeRounding;
}

namespace {

// A private pool's tag, in place of a stream (Note [Private pools]): the top bit, which no
// stream handle (a user-space address, or 0 on the CPU) has.
constexpr StreamId kPrivatePoolBit = StreamId{1} << (sizeof(StreamId) * 8 - 1);
StreamId pool_tag(PoolId pool) { return kPrivatePoolBit | static_cast<StreamId>(pool); }

}  // namespace

bool no_caching_requested(const char* env_value) {
  if (env_value == nullptr) return false;
  const std::string value = env_value;
  return !(value.empty() || value == "0" || value == "false" || value == "no" || value == "off");
}

// A block: a piece of a segment, free (in its pool), handed out (in active_), or freed
// and waiting for events (in pending_; still `allocated`).
struct BlockAllocator::Block {
  Block(char* start, size_t bytes, StreamId owner, bool in_small_pool)
      : ptr(start), size(bytes), stream(owner), small(in_small_pool) {}
  char* ptr;
  size_t size;
  StreamId stream;
  bool small;
  bool allocated = false;
  size_t requested = 0;             // bytes asked for, while handed out
  Block* prev = nullptr;            // neighbours in the same segment, by address
  Block* next = nullptr;
  std::vector<StreamId> stream_uses;  // other streams it is used on (record_stream)
};

bool BlockAllocator::BySize::operator()(const Block* a, const Block* b) const {
  return std::make_tuple(a->stream, a->size, reinterpret_cast<std::uintptr_t>(a->ptr)) <
         std::make_tuple(b->stream, b->size, reinterpret_cast<std::uintptr_t>(b->ptr));
}

BlockAllocator::BlockAllocator(Device device, DeviceMemory& memory, bool caching)
    : device_(device), memory_(memory), caching_(caching) {}

// Gives every segment back, handed out or not (the process-wide allocators are never
// destroyed: caching_allocator.cpp, Note [Leaked allocators]; this is for the tests).
BlockAllocator::~BlockAllocator() {
  std::vector<Block*> blocks(small_pool_.begin(), small_pool_.end());
  blocks.insert(blocks.end(), large_pool_.begin(), large_pool_.end());
  for (const auto& [ptr, block] : active_) blocks.push_back(block);
  for (const Pending& pending : pending_) {
    blocks.push_back(pending.block);
    for (EventId event : pending.events) memory_.release_event(event);
  }
  blocks.insert(blocks.end(), freed_during_capture_.begin(), freed_during_capture_.end());
  for (Block* block : blocks) {
    if (block->prev == nullptr) memory_.free(block->ptr);
    delete block;
  }
  for (const auto& [ptr, nbytes] : uncached_) memory_.free(ptr);
}

// ---- allocate ------------------------------------------------------------------------------

void* BlockAllocator::allocate(size_t nbytes, StreamId stream) {
  KILN_ASSERT(nbytes > 0, "zero-byte requests are answered before the block allocator");
  std::lock_guard<std::mutex> lock(mutex_);
  if (nbytes > std::numeric_limits<size_t>::max() / 2) {  // no device has it; rounding would overflow
    ++stats_.ooms;
    throw_out_of_memory(nbytes, nbytes);
  }
  KILN_ASSERT((stream & kPrivatePoolBit) == 0, "a stream handle with the private pools' tag bit");
  if (!caching_) return allocate_uncached(nbytes);
  if (redirects_.empty()) process_events(/*wait=*/false);  // no event queries during a capture
  const StreamId owner = owner_for(stream);
  const size_t size = round_size(nbytes);
  const bool small = is_small(size);
  Block* block = take_cached(small ? small_pool_ : large_pool_, size, owner);
  if (block == nullptr) block = new_segment(size, nbytes, owner, small);
  hand_out(split(block, size), nbytes);
  return block->ptr;
}

// The smallest free block of `pool` on `stream` with at least `size` bytes, taken out of
// the pool; nullptr when there is none.
BlockAllocator::Block* BlockAllocator::take_cached(Pool& pool, size_t size, StreamId stream) {
  Block key(nullptr, size, stream, false);
  const auto it = pool.lower_bound(&key);
  if (it == pool.end() || (*it)->stream != stream) return nullptr;
  Block* block = *it;
  pool.erase(it);
  return block;
}

BlockAllocator::Block* BlockAllocator::new_segment(size_t size, size_t requested, StreamId stream, bool small) {
  const size_t bytes = segment_size(size);
  char* ptr = static_cast<char*>(malloc_or_retry(bytes, requested));
  ++stats_.device_mallocs;
  stats_.reserved_bytes += bytes;
  stats_.peak_reserved_bytes = std::max(stats_.peak_reserved_bytes, stats_.reserved_bytes);
  return new Block(ptr, bytes, stream, small);
}

// Out of memory: wait for the blocks held back by events, release every unused segment,
// and try once more before giving up with an error.
void* BlockAllocator::malloc_or_retry(size_t bytes, size_t requested) {
  if (void* ptr = memory_.malloc(bytes)) return ptr;
  if (!redirects_.empty()) {  // nothing can be given back during a capture
    ++stats_.ooms;
    KILN_CHECK(false, device_.type_name(), ": out of memory on ", device_, " during a CUDA graph capture, where ",
               "the cache cannot give segments back: requested ", requested, " bytes with ",
               stats_.reserved_bytes, " reserved. HINT: capture with a smaller batch, or call empty_cache() "
               "before capturing");
  }
  ++stats_.oom_retries;
  process_events(/*wait=*/true);
  release_unused_segments();
  if (void* ptr = memory_.malloc(bytes)) return ptr;
  ++stats_.ooms;
  throw_out_of_memory(requested, bytes);
}

namespace {

// "5242880 bytes (5.0 MiB)": the exact count, and the size for people.
std::string bytes_str(size_t bytes) { return std::to_string(bytes) + " bytes (" + human_bytes(bytes) + ")"; }

}  // namespace

void BlockAllocator::throw_out_of_memory(size_t requested, size_t segment) {
  KILN_CHECK(false, device_.type_name(), ": out of memory on ", device_, ": requested ", bytes_str(requested),
             " (a ", bytes_str(segment), " segment); Kiln has ", bytes_str(stats_.allocated_bytes),
             " allocated and ", bytes_str(stats_.reserved_bytes), " reserved; the device has ",
             bytes_str(memory_.free_bytes()), " free of ", bytes_str(memory_.total_bytes()),
             ". HINT: a smaller batch size, mixed precision or activation checkpointing needs less.");
  __builtin_unreachable();
}

// Splits `block` so it has `size` bytes and returns it; the remainder goes to the pool
// when it is worth keeping (any 512 bytes in the small pool, more than 1 MiB in the large
// one: smaller large-pool remainders stay with the block, as rounding waste).
BlockAllocator::Block* BlockAllocator::split(Block* block, size_t size) {
  const size_t remaining = block->size - size;
  const bool worth_it = block->small ? remaining >= kMinBlockSize : remaining > kSmallSize;
  if (!worth_it) return block;
  Block* rest = new Block(block->ptr + size, remaining, block->stream, block->small);
  rest->prev = block;
  rest->next = block->next;
  if (rest->next != nullptr) rest->next->prev = rest;
  block->next = rest;
  block->size = size;
  pool_of(rest).insert(rest);
  return block;
}

void BlockAllocator::hand_out(Block* block, size_t requested) {
  block->allocated = true;
  block->requested = requested;
  active_.emplace(block->ptr, block);
  stats_.allocated_bytes += block->size;
  stats_.requested_bytes += requested;
  stats_.peak_allocated_bytes = std::max(stats_.peak_allocated_bytes, stats_.allocated_bytes);
}

// ---- free ----------------------------------------------------------------------------------

void BlockAllocator::free(void* ptr) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!caching_) return free_uncached(ptr);
  const auto it = active_.find(ptr);
  KILN_CHECK(it != active_.end(), device_.type_name(), ": freeing ", ptr, " on ", device_,
             ", which the caching allocator did not hand out (or which was freed already)");
  Block* block = it->second;
  active_.erase(it);
  if (block->stream_uses.empty()) return return_to_pool(block);
  if (!redirects_.empty()) return freed_during_capture_.push_back(block);  // no events during a capture
  record_uses_and_hold(block);
}

// Queues one event on each other stream the block was used on; the block waits for them.
void BlockAllocator::record_uses_and_hold(Block* block) {
  Pending pending{.block = block, .events = {}};
  for (StreamId stream : block->stream_uses) pending.events.push_back(memory_.record_event(stream));
  block->stream_uses.clear();
  pending_.push_back(std::move(pending));
}

// The block is free for its stream again: merged with free neighbours, into the pool.
void BlockAllocator::return_to_pool(Block* block) {
  stats_.allocated_bytes -= block->size;
  stats_.requested_bytes -= block->requested;
  block->allocated = false;
  block->requested = 0;
  Pool& pool = pool_of(block);
  if (Block* prev = block->prev; prev != nullptr && !prev->allocated) {
    pool.erase(prev);
    block->ptr = prev->ptr;
    block->size += prev->size;
    block->prev = prev->prev;
    if (block->prev != nullptr) block->prev->next = block;
    delete prev;
  }
  if (Block* next = block->next; next != nullptr && !next->allocated) {
    pool.erase(next);
    block->size += next->size;
    block->next = next->next;
    if (block->next != nullptr) block->next->prev = block;
    delete next;
  }
  pool.insert(block);
}

// ---- private pools (Note [Private pools]) -----------------------------------------------

StreamId BlockAllocator::owner_for(StreamId stream) const {
  for (const auto& [capturing, tag] : redirects_)
    if (capturing == stream) return tag;
  return stream;
}

void BlockAllocator::begin_private_pool(StreamId stream, PoolId pool) {
  std::lock_guard<std::mutex> lock(mutex_);
  KILN_CHECK(caching_, device_.type_name(), ": CUDA graph capture needs the caching allocator, which "
             "KILN_CUDA_NO_CACHING turned off");
  KILN_CHECK(pool != 0 && (pool & kPrivatePoolBit) == 0, device_.type_name(), ": private pool ids are "
             "positive and below 2^63, got ", pool);
  KILN_CHECK(owner_for(stream) == stream, device_.type_name(), ": a capture is already under way on this stream");
  KILN_CHECK(std::find(released_pools_.begin(), released_pools_.end(), pool_tag(pool)) == released_pools_.end(),
             device_.type_name(), ": private pool ", pool, " was released; a new graph needs a new pool");
  redirects_.emplace_back(stream, pool_tag(pool));
}

void BlockAllocator::end_private_pool(StreamId stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = std::find_if(redirects_.begin(), redirects_.end(), [&](const auto& r) { return r.first == stream; });
  KILN_CHECK(it != redirects_.end(), device_.type_name(), ": no capture is under way on this stream");
  redirects_.erase(it);
  if (!redirects_.empty()) return;
  for (Block* block : freed_during_capture_) record_uses_and_hold(block);
  freed_during_capture_.clear();
}

void BlockAllocator::release_private_pool(PoolId pool) {
  std::lock_guard<std::mutex> lock(mutex_);
  const StreamId tag = pool_tag(pool);
  KILN_CHECK(std::none_of(redirects_.begin(), redirects_.end(), [&](const auto& r) { return r.second == tag; }),
             device_.type_name(), ": private pool ", pool, " is released while a capture into it is under way");
  if (std::find(released_pools_.begin(), released_pools_.end(), tag) == released_pools_.end()) {
    released_pools_.push_back(tag);
  }
  if (redirects_.empty()) release_unused_segments();  // never during a capture
}

size_t BlockAllocator::private_pool_reserved_bytes(PoolId pool) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const StreamId tag = pool_tag(pool);
  size_t bytes = 0;
  auto count = [&](const Block* block) {
    if (block->stream == tag) bytes += block->size;
  };
  for (const Pool* pool_set : {&small_pool_, &large_pool_})
    for (const Block* block : *pool_set) count(block);
  for (const auto& [ptr, block] : active_) count(block);
  for (const Pending& pending : pending_) count(pending.block);
  for (const Block* block : freed_during_capture_) count(block);
  return bytes;
}

bool BlockAllocator::capture_under_way() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return !redirects_.empty();
}

// Returns to their pools the freed blocks whose events have all completed; with `wait`,
// waits for every event first.
void BlockAllocator::process_events(bool wait) {
  std::vector<Pending> still_pending;
  for (Pending& pending : pending_) {
    std::erase_if(pending.events, [&](EventId event) {
      if (wait) memory_.wait_event(event);
      if (!wait && !memory_.event_completed(event)) return false;
      memory_.release_event(event);
      return true;
    });
    if (pending.events.empty()) {
      return_to_pool(pending.block);
    } else {
      still_pending.push_back(std::move(pending));
    }
  }
  pending_ = std::move(still_pending);
}

void BlockAllocator::record_stream(void* ptr, StreamId stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!caching_) {
    // Freeing an uncached block releases it at once, after a device synchronization.
    KILN_CHECK(uncached_.contains(ptr), device_.type_name(), ": record_stream of ", ptr, ", which the allocator did not hand out");
    return;
  }
  const auto it = active_.find(ptr);
  KILN_CHECK(it != active_.end(), device_.type_name(), ": record_stream of ", ptr,
             ", which is not the start of a block the caching allocator handed out on ", device_);
  Block* block = it->second;
  // Its own stream, or the stream capturing into its private pool: no other stream's use.
  if (stream == block->stream || owner_for(stream) == block->stream) return;
  if (std::find(block->stream_uses.begin(), block->stream_uses.end(), stream) == block->stream_uses.end()) {
    block->stream_uses.push_back(stream);
  }
}

bool BlockAllocator::owns(void* ptr) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return caching_ ? active_.contains(ptr) : uncached_.contains(ptr);
}

// ---- the cache as a whole ------------------------------------------------------------------

void BlockAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(mutex_);
  KILN_CHECK(redirects_.empty(), device_.type_name(), ": empty_cache during a CUDA graph capture (it would "
             "give memory back while the graph being captured may still use it)");
  process_events(/*wait=*/false);
  release_unused_segments();
}

// A free block with no neighbours is a whole segment nobody uses: give it back. A live
// private pool's segments stay (Note [Private pools]): its graph replays into them.
void BlockAllocator::release_unused_segments() {
  auto releasable = [&](const Block* block) {
    if (block->prev != nullptr || block->next != nullptr) return false;
    if ((block->stream & kPrivatePoolBit) == 0) return true;
    return std::find(released_pools_.begin(), released_pools_.end(), block->stream) != released_pools_.end();
  };
  for (Pool* pool : {&small_pool_, &large_pool_}) {
    std::vector<Block*> unused;
    for (Block* block : *pool)
      if (releasable(block)) unused.push_back(block);
    for (Block* block : unused) free_segment(*pool, block);
  }
}

// Gives a whole free segment (`block`, in `pool`) back to the device.
void BlockAllocator::free_segment(Pool& pool, Block* block) {
  pool.erase(block);
  memory_.free(block->ptr);
  ++stats_.device_frees;
  stats_.reserved_bytes -= block->size;
  delete block;
}

AllocatorStats BlockAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  AllocatorStats stats = stats_;
  stats.cached_blocks = static_cast<int64_t>(small_pool_.size() + large_pool_.size());
  stats.active_blocks = static_cast<int64_t>(active_.size() + pending_.size() + freed_during_capture_.size() + uncached_.size());
  return stats;
}

void BlockAllocator::reset_peak_stats() {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.peak_allocated_bytes = stats_.allocated_bytes;
  stats_.peak_reserved_bytes = stats_.reserved_bytes;
}

BlockAllocator::Pool& BlockAllocator::pool_of(const Block* block) { return block->small ? small_pool_ : large_pool_; }

// ---- caching off ---------------------------------------------------------------------------

void* BlockAllocator::allocate_uncached(size_t nbytes) {
  void* ptr = memory_.malloc(nbytes);
  if (ptr == nullptr) {
    ++stats_.ooms;
    throw_out_of_memory(nbytes, nbytes);
  }
  uncached_.emplace(ptr, nbytes);
  ++stats_.device_mallocs;
  stats_.reserved_bytes += nbytes;
  stats_.allocated_bytes += nbytes;
  stats_.requested_bytes += nbytes;
  stats_.peak_reserved_bytes = std::max(stats_.peak_reserved_bytes, stats_.reserved_bytes);
  stats_.peak_allocated_bytes = std::max(stats_.peak_allocated_bytes, stats_.allocated_bytes);
  return ptr;
}

void BlockAllocator::free_uncached(void* ptr) {
  const auto it = uncached_.find(ptr);
  KILN_CHECK(it != uncached_.end(), device_.type_name(), ": freeing ", ptr, " on ", device_,
             ", which the allocator did not hand out (or which was freed already)");
  memory_.free(ptr);
  ++stats_.device_frees;
  stats_.reserved_bytes -= it->second;
  stats_.allocated_bytes -= it->second;
  stats_.requested_bytes -= it->second;
  uncached_.erase(it);
}

}  // namespace kiln
