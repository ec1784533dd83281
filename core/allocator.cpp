// The CPU allocator: 64-byte aligned host memory, with the larger requests served by a
// cache (Note [CPU caching allocator]).
#include "core/allocator.h"

#include <unistd.h>

#include <cstdint>
#include <cstdlib>

#include "core/block_allocator.h"
#include "core/error.h"
#include "core/pooled.h"

namespace kiln {
namespace {

// Note [CPU caching allocator]: a training step allocates the same activations and
// gradients, tens of MiB each, every step. glibc serves such sizes with a fresh mmap and
// gives them back with munmap on free, so each step page-faults every activation in
// again, zero-filled by the kernel (4.5% of a 3D ResNet-18 step on the CPU, measured in
// bench/results/2026-11-25-cpu-train-step.md). Requests of kCachedMinBytes and more
// therefore go through the same BlockAllocator as each GPU's caching allocator (best fit,
// splitting, merging, statistics; core/block_allocator.h), over aligned host memory and
// one stream: a freed block is kept and handed out again, its pages already mapped.
// Smaller requests stay with malloc, whose heap already reuses memory without faults
// (Note [Small CPU blocks]).
// KILN_CPU_NO_CACHING=1 turns the cache off (every block its own allocation, as for
// valgrind); so does a build under AddressSanitizer, which could not see a use after free
// inside a cached block (the cache's rules are tested on a fake memory there).
constexpr size_t kCachedMinBytes = size_t{64} << 10;
constexpr StreamId kHostStream = 0;

// `name`'s count of pages (sysconf: _SC_PHYS_PAGES, _SC_AVPHYS_PAGES) in bytes; 0 when unknown.
size_t bytes_of_pages(int name) {
  const long count = sysconf(name), size = sysconf(_SC_PAGESIZE);
  return count > 0 && size > 0 ? static_cast<size_t>(count) * static_cast<size_t>(size) : 0;
}

size_t rounded_to_alignment(size_t nbytes) {
  const size_t rounded = (nbytes + kCpuAlignment - 1) / kCpuAlignment * kCpuAlignment;
  KILN_CHECK(rounded >= nbytes, "CPU allocator: cannot allocate ", nbytes, " bytes");
  return rounded;
}

// Note [Small CPU blocks]: a small request is malloc'd with room to align it by hand: the
// block starts at the first kCpuAlignment boundary at least two pointers past malloc's
// address, and that address and whether it came from the pool are kept in the two
// pointer-sized slots just before the block, for the free. glibc's aligned_alloc would do
// the same job at about ten times the cost (_int_memalign splits a larger chunk each time,
// and the split-off pieces make free consolidate): 600 instructions of a 4,000-instruction
// small op (bench/host_cost). The smallest (a scalar, a few per-channel numbers) come from
// the pool of small blocks instead of malloc (Note [Pooled small blocks]).
void* malloc_aligned(size_t nbytes) {
  // The block ends on an alignment boundary, as aligned_alloc's rounded size did.
  const size_t padded = rounded_to_alignment(nbytes);
  constexpr size_t kMargin = kCpuAlignment + 2 * sizeof(void*);
  KILN_CHECK(padded <= SIZE_MAX - kMargin, "CPU allocator: cannot allocate ", nbytes, " bytes");
  const size_t total = padded + kMargin;
  const bool pooled = total <= kMaxPooledBytes;
  void* raw = pooled ? pooled_allocate(total) : std::malloc(total);
  KILN_CHECK(raw != nullptr, "CPU allocator: out of memory allocating ", nbytes, " bytes");
  const uintptr_t start =
      (reinterpret_cast<uintptr_t>(raw) + 2 * sizeof(void*) + kCpuAlignment - 1) & ~(kCpuAlignment - 1);
  void** slots = reinterpret_cast<void**>(start);
  slots[-1] = raw;
  slots[-2] = reinterpret_cast<void*>(pooled ? total : 0);
  return reinterpret_cast<void*>(start);
}

void free_aligned(void* block) {
  void** slots = static_cast<void**>(block);
  const auto pooled_bytes = reinterpret_cast<size_t>(slots[-2]);
  if (pooled_bytes != 0) {
    pooled_free(slots[-1], pooled_bytes);
  } else {
    std::free(slots[-1]);
  }
}

// The memory behind the cache. The CPU has one stream and no events: record_stream is
// never called for host blocks, so the event functions are unreachable.
class HostMemory final : public DeviceMemory {
 public:
  void* malloc(size_t nbytes) override { return std::aligned_alloc(kCpuAlignment, rounded_to_alignment(nbytes)); }
  void free(void* ptr) override { std::free(ptr); }
  EventId record_event(StreamId) override { unreachable(); }
  bool event_completed(EventId) override { unreachable(); }
  void wait_event(EventId) override { unreachable(); }
  void release_event(EventId) override { unreachable(); }
  size_t free_bytes() override { return bytes_of_pages(_SC_AVPHYS_PAGES); }
  size_t total_bytes() override { return physical_memory_bytes(); }

 private:
  [[noreturn]] static void unreachable() {
    KILN_ASSERT(false, "CPU allocator: host blocks are used on one stream and need no events");
    __builtin_unreachable();
  }
};

bool built_with_address_sanitizer() {
#if defined(__SANITIZE_ADDRESS__)
  return true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
  return true;
#endif
#endif
  return false;
}

// Never destroyed, so a tensor freed during static destruction still finds its allocator
// (as the CUDA allocators, Note [Leaked allocators] in kernels/cuda/caching_allocator.cpp).
BlockAllocator& host_blocks() {
  static BlockAllocator* blocks = [] {
    HostMemory* memory = new HostMemory;  // leaked with the allocator that uses it
    const bool caching = !built_with_address_sanitizer() && !no_caching_requested(std::getenv("KILN_CPU_NO_CACHING"));
    return new BlockAllocator(Device::cpu(), *memory, caching);
  }();
  return *blocks;
}

class CpuAllocator final : public Allocator {
 public:
  DataPtr allocate(size_t nbytes) override {
    if (nbytes == 0) return {nullptr, nullptr, Device::cpu()};
    if (nbytes >= kCachedMinBytes) {
      void* p = host_blocks().allocate(nbytes, kHostStream);
      return {p, [](void* q) { host_blocks().free(q); }, Device::cpu()};
    }
    return {malloc_aligned(nbytes), free_aligned, Device::cpu()};
  }
};

}  // namespace

Allocator& cpu_allocator() {
  static CpuAllocator allocator;
  return allocator;
}

AllocatorStats cpu_memory_stats() { return host_blocks().stats(); }
void reset_peak_cpu_memory_stats() { host_blocks().reset_peak_stats(); }
void empty_cpu_cache() { host_blocks().empty_cache(); }
bool cpu_allocator_caching() { return host_blocks().caching(); }

size_t physical_memory_bytes() { return bytes_of_pages(_SC_PHYS_PAGES); }

}  // namespace kiln
