// Fault injection: a test seam that makes one chosen tensor allocation throw, as an
// out-of-memory would, to test what a failure part-way through an operation leaves behind.
//
// Note [Injected allocation failures]: every tensor's memory, on every device (the
// factories, kernel temporaries, pinned host memory), is taken through
// Storage::allocate, which first asks this seam. While a FailNthAllocation guard lives,
// its thread's allocations are numbered from 0, and the one numbered n throws the
// kiln::Error an exhausted allocator throws, before any memory is taken; the others go
// through. A test steps n through every allocation an operation makes, checking after
// each failure that the operation left nothing half-done (Note [All-or-nothing loads] in
// core/safetensors.h); tests/test_util.h's fail_each_allocation is this loop:
//
//   for (int64_t n = 0;; ++n) {
//     FailNthAllocation fail(n);
//     try {
//       operation();
//     } catch (const Error&) {
//       ASSERT_TRUE(fail.fired());
//       ... check that nothing changed ...
//       continue;
//     }
//     ASSERT_FALSE(fail.fired());  // fewer than n + 1 allocations: it ran to the end
//     break;
//   }
//
// Only the guard's own thread is counted (a data loader's workers, say, are not), and an
// inner guard stands in for an outer one until it ends. Unarmed, the seam costs each
// allocation a call, one thread-local load and a branch: about 1 ns against the 150 ns of
// a CPU empty({4}) (its heap allocations and the allocator's virtual call), too little to
// be worth inlining by exporting the thread-local. Memory that is not a tensor's (cuBLAS
// and cuDNN workspaces taken straight from the caching allocator) is not counted.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kiln {

namespace detail {
// Storage::allocate's call into the seam: throws when the armed guard says so.
void before_allocation(size_t nbytes);
}  // namespace detail

class FailNthAllocation {
 public:
  // Arms the seam: this thread's allocation numbered n (0 = the next one) will throw.
  explicit FailNthAllocation(int64_t n);
  // Disarms it (an outer guard, if any, counts again).
  ~FailNthAllocation();
  FailNthAllocation(const FailNthAllocation&) = delete;
  FailNthAllocation& operator=(const FailNthAllocation&) = delete;

  // The allocations this thread asked for since the guard was made, the failed one included.
  int64_t allocations() const { return count_; }
  // Whether allocation n was reached (and thrown).
  bool fired() const { return count_ > n_; }

 private:
  friend void detail::before_allocation(size_t nbytes);

  int64_t n_;
  int64_t count_ = 0;
  FailNthAllocation* outer_;
};

}  // namespace kiln
