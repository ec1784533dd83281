// AlignedVector<T, kVec>: kVec elements of T aligned to their total size, so that one
// load or store moves all of them (a single 16-byte LDG.128/STG.128 for 4 floats or 8
// halves). Every vectorized kernel of the CUDA backend (elementwise, reductions, softmax,
// batch norm, the multi-tensor apply) reads and writes through this one type; the host
// planners decide when the addresses allow it (kernels/cuda/elementwise_plan.h: vector_width).
#pragma once

#include <cstdint>

namespace kiln::cuda {

template <typename T, int kVec>
struct alignas(sizeof(T) * kVec) AlignedVector {
  T values[kVec];
};

// Whether `p` may be read or written as AlignedVector<T, kVec>.
template <int kVec, typename T>
__host__ __device__ __forceinline__ bool is_vector_aligned(const T* p) {
  return reinterpret_cast<uintptr_t>(p) % sizeof(AlignedVector<T, kVec>) == 0;
}

}  // namespace kiln::cuda
