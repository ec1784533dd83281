// The 64-byte aligned CPU allocator (std::aligned_alloc, size rounded up to 64 bytes).
#include "core/allocator.h"

#include <cstdlib>

#include "core/error.h"

namespace kiln {
namespace {

class CpuAllocator final : public Allocator {
 public:
  DataPtr allocate(size_t nbytes) override {
    if (nbytes == 0) return {nullptr, nullptr, Device::cpu()};
    const size_t rounded = (nbytes + kCpuAlignment - 1) / kCpuAlignment * kCpuAlignment;
    KILN_CHECK(rounded >= nbytes, "CPU allocator: cannot allocate ", nbytes, " bytes");
    void* p = std::aligned_alloc(kCpuAlignment, rounded);
    KILN_CHECK(p != nullptr, "CPU allocator: out of memory allocating ", nbytes, " bytes");
    return {p, [](void* q) { std::free(q); }, Device::cpu()};
  }
};

}  // namespace

Allocator& cpu_allocator() {
  static CpuAllocator allocator;
  return allocator;
}

}  // namespace kiln
