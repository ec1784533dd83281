// CpuBackend's random kernels: element i of the output, in memory order (a contiguous or
// any dense layout, e.g. channels-last), draws the Philox
// words of Note [Philox streams] (core/generator.h), in parallel, exactly as the CUDA
// kernels do, so the same seed gives the same tensor on both devices.
#include <algorithm>
#include <numeric>
#include <vector>

#include "core/dispatch.h"
#include "core/memory_format.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/elementwise_engine.h"

namespace kiln::cpu {
namespace {

// Calls fill(i, r0, r1) for every element of the dense `out` (i in memory order), in
// parallel. A state relative to a base in memory (Note [Philox under capture]) is
// resolved first: on the CPU the kernel runs now, so now is when the base is read.
template <typename Fill>
void for_each_philox(const Tensor& out, PhiloxState unresolved, const Fill& fill) {
  KILN_ASSERT(is_non_overlapping_and_dense(out.sizes(), out.strides()), "random kernels write dense outputs");
  const PhiloxState state = philox_resolve(unresolved);
  parallel_for(out.numel(), kGrain / 8, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      uint32_t r0, r1;
      philox_words(state, static_cast<uint64_t>(i), r0, r1);
      fill(i, r0, r1);
    }
  });
}

}  // namespace

void CpuBackend::uniform(const Tensor& out, double low, double high, PhiloxState state) {
  visit_dtype<kFloatingTypes>(out.dtype(), "rand", [&]<typename T>() {
    T* data = static_cast<T*>(out.data_ptr());
    for_each_philox(out, state, [&](int64_t i, uint32_t r0, uint32_t r1) {
      if constexpr (std::is_same_v<T, double>) {
        data[i] = low + philox_uniform_double(r0, r1) * (high - low);
      } else {
        const float lo = static_cast<float>(low), span = static_cast<float>(high - low);
        data[i] = static_cast<T>(lo + philox_uniform_float(r0, kUniformDigits<T>) * span);
      }
    });
  });
}

void CpuBackend::normal(const Tensor& out, double mean, double std, PhiloxState state) {
  visit_dtype<kFloatingTypes>(out.dtype(), "randn", [&]<typename T>() {
    T* data = static_cast<T*>(out.data_ptr());
    for_each_philox(out, state, [&](int64_t i, uint32_t r0, uint32_t r1) {
      data[i] = static_cast<T>(static_cast<opmath_t<T>>(mean + std * philox_normal(r0, r1)));
    });
  });
}

void CpuBackend::randint(const Tensor& out, int64_t low, int64_t high, PhiloxState state) {
  const uint64_t range = static_cast<uint64_t>(high) - static_cast<uint64_t>(low);
  visit_dtype<kNumericTypes>(out.dtype(), "randint", [&]<typename T>() {
    T* data = static_cast<T*>(out.data_ptr());
    for_each_philox(out, state, [&](int64_t i, uint32_t r0, uint32_t r1) {
      const int64_t v = static_cast<int64_t>(static_cast<uint64_t>(low) + philox_u64(r0, r1) % range);
      data[i] = static_cast<T>(static_cast<opmath_t<T>>(v));
    });
  });
}

void CpuBackend::bernoulli(const Tensor& out, double p, PhiloxState state) {
  visit_dtype<kAllTypes>(out.dtype(), "bernoulli", [&]<typename T>() {
    T* data = static_cast<T*>(out.data_ptr());
    const float threshold = static_cast<float>(p);
    for_each_philox(out, state, [&](int64_t i, uint32_t r0, uint32_t) {
      const bool one = philox_uniform_float(r0) < threshold;
      data[i] = static_cast<T>(static_cast<opmath_t<T>>(one ? 1 : 0));
    });
  });
}

void CpuBackend::randperm(const Tensor& out, PhiloxState state) {
  KILN_ASSERT(out.dtype() == DType::Int64, "randperm writes int64");
  const int64_t n = out.numel();
  std::vector<uint64_t> keys(static_cast<size_t>(n));
  for_each_philox(out, state, [&](int64_t i, uint32_t r0, uint32_t r1) { keys[i] = philox_u64(r0, r1); });
  int64_t* data = static_cast<int64_t*>(out.data_ptr());
  std::iota(data, data + n, int64_t{0});
  std::stable_sort(data, data + n, [&](int64_t a, int64_t b) { return keys[a] < keys[b]; });
}

}  // namespace kiln::cpu
