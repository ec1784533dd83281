// The caching device allocator (caching_allocator.h): one BlockAllocator per device
// (block_allocator.h holds every rule) over the real device, cudaMalloc/cudaFree and the
// allocators' event pool, behind Kiln's Allocator interface.
//
// Note [Leaked allocators]: the per-device allocators, the pinned allocator and the
// event pool are created on first use and never destroyed. Tensors held by static
// objects (a cached constant, a test fixture) may die during static destruction, after
// an allocator with static storage would already be gone, and their deleters would then
// free into a dead object; and after main returns the CUDA runtime may already be torn
// down, so cudaFree/cudaEventDestroy calls from destructors could fail. Leaking costs
// nothing: the driver reclaims device and pinned memory when the process exits.
#include "kernels/cuda/caching_allocator.h"

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "core/error.h"
#include "core/block_allocator.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/event_pool.h"
#include "kernels/cuda/runtime.h"

namespace kiln::cuda {
namespace {

StreamId stream_id(Stream stream) { return reinterpret_cast<StreamId>(stream.handle()); }

// Note [Sub-word atomics]: the GPU has no atomic add on single bytes, so scatter_add of
// uint8 (kernels/cuda/index.cu) swaps the aligned 32-bit word that holds the byte. That
// word must lie inside the allocation: cudaMalloc aligns every allocation to 256 bytes,
// so the word never starts before it, and we round every size up to 4 bytes, so it never
// ends past it. (The caching allocator's blocks are multiples of 512 bytes anyway; the
// rounding matters with KILN_CUDA_NO_CACHING=1, where compute-sanitizer's memcheck found
// the last byte of a 7-byte tensor read through the word [4, 8).)
constexpr size_t kAllocationGranule = 4;

// cudaMalloc is one of the calls CUDA refuses on a thread that is capturing a graph (it may
// synchronize), yet a capture's tensors need memory (Note [Private pools]): the thread's
// capture mode is relaxed for the one call, as it is safe here (the memory is not in use by
// any queued work), and put back after.
cudaError_t malloc_outside_capture_rules(void** ptr, size_t nbytes) {
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  KILN_CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&mode));
  const cudaError_t status = cudaMalloc(ptr, nbytes);
  KILN_CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&mode));
  return status;
}

// DeviceMemory over the CUDA runtime, for one device.
class CudaDeviceMemory final : public DeviceMemory {
 public:
  explicit CudaDeviceMemory(int device) : device_(device) {}

  void* malloc(size_t nbytes) override {
    DeviceGuard guard(device_);
    void* ptr = nullptr;
    if (nbytes > SIZE_MAX - kAllocationGranule) return nullptr;  // cannot exist: out of memory
    const size_t rounded = (nbytes + kAllocationGranule - 1) / kAllocationGranule * kAllocationGranule;
    const cudaError_t status = malloc_outside_capture_rules(&ptr, rounded);
    if (status == cudaErrorMemoryAllocation) {
      cudaGetLastError();  // out of memory is not sticky: clear it, the caller retries
      return nullptr;
    }
    KILN_CUDA_CHECK(status);
    return ptr;
  }

  // The block may still be read by queued work (the caching-off path frees at once), so
  // wait for the device before giving the memory back.
  void free(void* ptr) override {
    DeviceGuard guard(device_);
    KILN_CUDA_CHECK(cudaDeviceSynchronize());
    KILN_CUDA_CHECK(cudaFree(ptr));
  }

  EventId record_event(StreamId stream) override {
    return EventPool::instance().record(device_, reinterpret_cast<cudaStream_t>(stream));
  }
  bool event_completed(EventId event) override { return EventPool::instance().completed(event); }
  void wait_event(EventId event) override { EventPool::instance().wait(event); }
  void release_event(EventId event) override { EventPool::instance().release(event); }

  size_t free_bytes() override { return memory_info().first; }
  size_t total_bytes() override { return memory_info().second; }

 private:
  // (free, total) from cudaMemGetInfo; zeros when even that fails (this is only for an
  // error message, which must not itself throw a different error).
  std::pair<size_t, size_t> memory_info() const {
    DeviceGuard guard(device_);
    size_t free = 0, total = 0;
    if (cudaMemGetInfo(&free, &total) != cudaSuccess) {
      cudaGetLastError();
      return {0, 0};
    }
    return {free, total};
  }

  int device_;
};

// Kiln's Allocator for one device: blocks for the calling thread's current stream.
class DeviceAllocator final : public Allocator {
 public:
  explicit DeviceAllocator(int device) : device_(device), memory_(device), blocks_(Device::cuda(device), memory_, !caching_disabled()) {}

  DataPtr allocate(size_t nbytes) override {
    const Device device = Device::cuda(device_);
    if (nbytes == 0) return {.data = nullptr, .deleter = {}, .device = device};
    void* ptr = blocks_.allocate(nbytes, stream_id(current_stream(device_)));
    // The block remembers its stream: freeing it returns it to that stream's pool.
    return {.data = ptr, .deleter = [blocks = &blocks_](void* p) { blocks->free(p); }, .device = device};
  }

  BlockAllocator& blocks() { return blocks_; }

 private:
  int device_;
  CudaDeviceMemory memory_;
  BlockAllocator blocks_;
};

// One allocator per device, made on first use and leaked (Note [Leaked allocators]).
const std::vector<DeviceAllocator*>& allocators() {
  static const auto* all = [] {
    auto* made = new std::vector<DeviceAllocator*>();
    for (int device = 0; device < device_count(); ++device) made->push_back(new DeviceAllocator(device));
    return made;
  }();
  return *all;
}

DeviceAllocator& allocator_of(int device) {
  check_device_index(device);
  return *allocators()[static_cast<size_t>(device)];
}

// The allocator that handed out `ptr`, or null.
BlockAllocator* owner_of(void* ptr) {
  for (DeviceAllocator* allocator : allocators()) {
    if (allocator->blocks().owns(ptr)) return &allocator->blocks();
  }
  return nullptr;
}

}  // namespace

Allocator& device_allocator(int device) { return allocator_of(device); }

void* raw_allocate(size_t nbytes, Stream stream) {
  if (nbytes == 0) return nullptr;
  return allocator_of(stream.device()).blocks().allocate(nbytes, stream_id(stream));
}

void raw_free(void* ptr) {
  if (ptr == nullptr) return;
  BlockAllocator* owner = owner_of(ptr);
  KILN_CHECK(owner != nullptr, "cuda: raw_free of ", ptr, ", which the caching allocator did not hand out");
  owner->free(ptr);
}

void record_stream(void* ptr, Stream stream) {
  if (ptr == nullptr) return;
  BlockAllocator* owner = owner_of(ptr);
  KILN_CHECK(owner != nullptr, "cuda: record_stream of ", ptr,
             ", which is not the start of a block the caching allocator handed out");
  KILN_CHECK(owner->device().index == stream.device(), "cuda: record_stream of a block of ", owner->device(),
             " on a stream of cuda:", stream.device(), " (an event can only be recorded on its own device)");
  owner->record_stream(ptr, stream_id(stream));
}

void begin_private_pool(Stream stream, PoolId pool) {
  allocator_of(stream.device()).blocks().begin_private_pool(stream_id(stream), pool);
}

void end_private_pool(Stream stream) { allocator_of(stream.device()).blocks().end_private_pool(stream_id(stream)); }

void release_private_pool(int device, PoolId pool) { allocator_of(device).blocks().release_private_pool(pool); }

PoolId new_private_pool_id() {
  static std::atomic<PoolId> next{1};
  return next.fetch_add(1);
}

AllocatorStats memory_stats(int device) { return allocator_of(device).blocks().stats(); }

void reset_peak_memory_stats(int device) { allocator_of(device).blocks().reset_peak_stats(); }

void empty_cache() {
  for (DeviceAllocator* allocator : allocators()) allocator->blocks().empty_cache();
}

bool caching_disabled() {
  static const bool disabled = no_caching_requested(std::getenv("KILN_CUDA_NO_CACHING"));
  return disabled;
}

}  // namespace kiln::cuda
