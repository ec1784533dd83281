// The pinned host allocator (pinned_allocator.h): a PinnedPool (pinned_pool.h holds the
// rules) over cudaHostAlloc/cudaFreeHost and the allocators' event pool, behind Kiln's
// Allocator interface. Process-wide and never destroyed (Note [Leaked allocators] in
// caching_allocator.cpp).
#include "kernels/cuda/pinned_allocator.h"

#include <cuda_runtime_api.h>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/event_pool.h"
#include "kernels/cuda/pinned_pool.h"
#include "kernels/cuda/runtime.h"

namespace kiln::cuda {
namespace {

// HostMemory over the CUDA runtime. Blocks are cudaHostAllocPortable, so they count as
// pinned for copies to every device, not only the one current when they were made.
class CudaHostMemory final : public HostMemory {
 public:
  void* alloc(size_t nbytes) override {
    void* ptr = nullptr;
    const cudaError_t status = cudaHostAlloc(&ptr, nbytes, cudaHostAllocPortable);
    if (status == cudaErrorMemoryAllocation) {
      cudaGetLastError();  // not sticky: clear it, the pool retries after emptying itself
      return nullptr;
    }
    KILN_CUDA_CHECK(status);
    return ptr;
  }
  // Only blocks whose recorded copies have completed are freed.
  void free(void* ptr) override { KILN_CUDA_CHECK(cudaFreeHost(ptr)); }

  EventId record_event(int device, StreamId stream) override {
    return EventPool::instance().record(device, reinterpret_cast<cudaStream_t>(stream));
  }
  bool event_completed(EventId event) override { return EventPool::instance().completed(event); }
  void release_event(EventId event) override { EventPool::instance().release(event); }
};

class PinnedAllocator final : public Allocator {
 public:
  DataPtr allocate(size_t nbytes) override {
    if (nbytes == 0) return {.data = nullptr, .deleter = {}, .device = Device::cpu()};
    void* ptr = pool_.allocate(nbytes);
    return {.data = ptr, .deleter = [pool = &pool_](void* p) { pool->free(p); }, .device = Device::cpu()};
  }
  PinnedPool& pool() { return pool_; }

 private:
  CudaHostMemory memory_;
  PinnedPool pool_{memory_};
};

PinnedAllocator& the_pinned_allocator() {
  static auto* allocator = new PinnedAllocator();  // leaked on purpose: Note [Leaked allocators]
  return *allocator;
}

}  // namespace

Allocator& pinned_host_allocator() { return the_pinned_allocator(); }

bool is_pinned(const void* ptr) {
  if (ptr == nullptr || !is_available()) return false;
  if (the_pinned_allocator().pool().contains(ptr)) return true;
  // Memory pinned elsewhere (cudaHostRegister, another library's cudaHostAlloc).
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, ptr) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return attributes.type == cudaMemoryTypeHost;
}

void record_host_use(const void* ptr, Stream stream) {
  the_pinned_allocator().pool().record_use(ptr, stream.device(), reinterpret_cast<StreamId>(stream.handle()));
}

PinnedStats pinned_stats() { return the_pinned_allocator().pool().stats(); }

void empty_pinned_cache() { the_pinned_allocator().pool().empty_cache(); }

}  // namespace kiln::cuda
