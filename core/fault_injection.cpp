// The allocation fault seam (Note [Injected allocation failures]): one thread-local
// pointer to the innermost armed guard, which counts and, at its n, throws.
#include "core/fault_injection.h"

#include "core/error.h"

namespace kiln {
namespace {
thread_local FailNthAllocation* armed = nullptr;
}  // namespace

FailNthAllocation::FailNthAllocation(int64_t n) : n_(n), outer_(armed) {
  KILN_CHECK(n >= 0, "FailNthAllocation: n must be >= 0, got ", n);
  armed = this;
}

FailNthAllocation::~FailNthAllocation() { armed = outer_; }

namespace detail {

void before_allocation(size_t nbytes) {
  FailNthAllocation* guard = armed;
  if (guard == nullptr) [[likely]]
    return;
  const int64_t index = guard->count_++;
  KILN_CHECK(index != guard->n_, "out of memory allocating ", nbytes, " bytes (injected: allocation ", index,
             " under FailNthAllocation)");
}

}  // namespace detail
}  // namespace kiln
