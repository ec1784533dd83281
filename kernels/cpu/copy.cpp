// CpuBackend's memory kernels: strided copy with dtype conversion, fill, arange, write_words.
#include <cstring>

#include "core/dispatch.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/elementwise_engine.h"
#include "kernels/copy_cast.h"
#include "kernels/wrapping_math.h"

namespace kiln::cpu {

Allocator& CpuBackend::allocator(int device_index) {
  KILN_CHECK(device_index == 0, "cpu: there is one CPU device, asked for cpu:", device_index);
  return cpu_allocator();
}

AllocatorStats CpuBackend::memory_stats(int device_index) {
  KILN_CHECK(device_index == 0, "cpu: there is one CPU device, asked for cpu:", device_index);
  return cpu_memory_stats();
}

void CpuBackend::reset_peak_memory_stats(int device_index) {
  KILN_CHECK(device_index == 0, "cpu: there is one CPU device, asked for cpu:", device_index);
  reset_peak_cpu_memory_stats();
}

void CpuBackend::copy(const Tensor& src, const Tensor& dst, bool /*non_blocking*/) {
  KILN_CHECK(src.device().is_cpu() && dst.device().is_cpu(), "copy: the CPU backend copies between "
             "CPU tensors only, got ", src.device(), " -> ", dst.device());
  KILN_ASSERT(src.sizes() == dst.sizes(), "copy of ", src.sizes(), " into ", dst.sizes());
  const StridedLoop loop = make_strided_loop({&dst, &src});
  visit_dtype<kAllTypes>(dst.dtype(), "copy", [&]<typename D>() {
    visit_dtype<kAllTypes>(src.dtype(), "copy", [&]<typename S>() {
      // Half/BFloat16 <-> anything goes through float; bool reads as 0/1; floating ->
      // uint8 wraps through int64 (kernels/copy_cast.h).
      elementwise_kernel<D, S>(loop, functors::Cast<opmath_t<S>, D>{});
    });
  });
}

void CpuBackend::fill(const Tensor& dst, Scalar value) {
  const StridedLoop loop = make_strided_loop({&dst});
  visit_dtype<kAllTypes>(dst.dtype(), "fill", [&]<typename T>() {
    const T v = value.to<T>();
    elementwise_kernel<T>(loop, [v]() { return v; });
  });
}

void CpuBackend::write_words(const Tensor& dst, const uint64_t* words, int64_t count) {
  KILN_ASSERT(dst.is_contiguous() && dst.element_size() == 8 && dst.numel() == count, "write_words: bad target");
  std::memcpy(dst.data_ptr(), words, static_cast<size_t>(count) * sizeof(uint64_t));
}

void CpuBackend::arange(const Tensor& dst, Scalar start, Scalar step) {
  KILN_ASSERT(dst.is_contiguous(), "arange into a non-contiguous tensor");
  visit_dtype<kNumericTypes>(dst.dtype(), "arange", [&]<typename T>() {
    T* out = static_cast<T*>(dst.data_ptr());
    const int64_t n = dst.numel();
    if constexpr (is_floating_v<T>) {
      const double s0 = start.to_double(), ds = step.to_double();
      parallel_for(n, kGrain, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) out[i] = static_cast<T>(static_cast<opmath_t<T>>(s0 + ds * static_cast<double>(i)));
      });
    } else {
      const int64_t s0 = start.to_int(), ds = step.to_int();
      parallel_for(n, kGrain, [&](int64_t begin, int64_t end) {
        // Every value fits int64 (the op layer checked the length), but i * ds alone may not
        // (arange(INT64_MIN, INT64_MAX, INT64_MAX)): Note [Integer overflow wraps].
        for (int64_t i = begin; i < end; ++i) out[i] = static_cast<T>(wrapping_add(s0, wrapping_mul(ds, i)));
      });
    }
  });
}

}  // namespace kiln::cpu
