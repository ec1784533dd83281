// CudaBackend's device and memory entry points: device count, allocators, synchronize.
// The kernel families are in their own files (cuda_backend.h lists them).
#include "kernels/cuda/cuda_backend.h"

#include "kernels/cuda/caching_allocator.h"
#include "kernels/cuda/pinned_allocator.h"
#include "kernels/cuda/runtime.h"

namespace kiln::cuda {

int CudaBackend::device_count() const { return cuda::device_count(); }

Allocator& CudaBackend::allocator(int device_index) {
  check_device_index(device_index);
  return device_allocator(device_index);
}

AllocatorStats CudaBackend::memory_stats(int device_index) {
  check_device_index(device_index);
  return cuda::memory_stats(device_index);
}

void CudaBackend::reset_peak_memory_stats(int device_index) {
  check_device_index(device_index);
  cuda::reset_peak_memory_stats(device_index);
}

Allocator* CudaBackend::pinned_allocator() { return &pinned_host_allocator(); }

bool CudaBackend::is_pinned(const void* ptr) const { return cuda::is_pinned(ptr); }

void CudaBackend::synchronize(int device_index) { cuda::synchronize(device_index); }

}  // namespace kiln::cuda
