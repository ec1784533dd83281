// Pooled small blocks: the heap blocks a small op makes and drops (a tensor's TensorImpl and
// its Storage's shared state, an autograd node with its edge and metadata lists, an output's
// AutogradMeta) come from free lists of the calling thread instead of malloc.
//
// Note [Pooled small blocks]: after the in-place Dims (Note [Dims in place]), a small op's
// host cost was still about a fifth heap traffic: glibc's malloc and free cost some 80 and
// 180 instructions (bench/host_cost, counted with callgrind), and an add with autograd makes
// and drops seven blocks. Here a block of up to kMaxPooledBytes is rounded up to a multiple
// of 16 bytes and taken from the calling thread's list of that size (a pop), and given back
// to the freeing thread's list (a push): a few instructions each, no lock. Every block of a
// size is alike, so a block made on one thread may go back on another (a tensor a loader
// worker made and the training thread drops): the lists are only caches. Each keeps at most
// kMaxPooledPerSize blocks; beyond that, and for larger sizes, blocks go to and from
// ::operator new and delete. A thread's lists are freed when it exits; a block freed after
// that (by a thread_local destroyed later) goes straight back to delete.
//
// Under AddressSanitizer, and with KILN_CPU_NO_CACHING=1 set (as for valgrind), the pool is
// a pass-through (every block its own new and delete), so a use after free or a read of
// uninitialised memory is still caught where it happens.
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>
#include <memory>
#include <utility>

namespace kiln {

inline constexpr size_t kMaxPooledBytes = 512;
inline constexpr int kMaxPooledPerSize = 512;

// A block of at least `bytes` bytes, aligned as ::operator new aligns (16 bytes); free it
// with pooled_free and the same `bytes`.
void* pooled_allocate(size_t bytes);
void pooled_free(void* block, size_t bytes) noexcept;
// False under AddressSanitizer and with KILN_CPU_NO_CACHING=1: every block is then its own.
bool pooling_enabled();

// An allocator over the pool, for the standard library's containers and allocate_shared.
template <typename T>
struct PooledAllocator {
  using value_type = T;
  PooledAllocator() noexcept = default;
  template <typename U>
  PooledAllocator(const PooledAllocator<U>&) noexcept {}  // NOLINT: rebinding is implicit
  T* allocate(size_t n) {
    if (n > SIZE_MAX / sizeof(T)) throw std::bad_array_new_length();
    return static_cast<T*>(pooled_allocate(n * sizeof(T)));
  }
  void deallocate(T* p, size_t n) noexcept { pooled_free(p, n * sizeof(T)); }
  template <typename U>
  bool operator==(const PooledAllocator<U>&) const noexcept {
    return true;
  }
};

// std::make_shared with the object and its count in one pooled block.
template <typename T, typename... Args>
std::shared_ptr<T> make_pooled(Args&&... args) {
  return std::allocate_shared<T>(PooledAllocator<T>{}, std::forward<Args>(args)...);
}

// For a class whose objects come from `new` (held by unique_ptr): its operator new and
// delete from the pool.
#define KILN_POOLED_NEW_DELETE(Class)                                                        \
  static void* operator new(size_t bytes) { return ::kiln::pooled_allocate(bytes); }         \
  static void operator delete(void* block, size_t bytes) noexcept { ::kiln::pooled_free(block, bytes); }

}  // namespace kiln
