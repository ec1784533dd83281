// Device-side loads and stores in a kernel's opmath type (Note [Opmath] in core/dtype.h):
// Half and BFloat16 are stored as 16 bits and computed in float.
//
// kiln::Half/BFloat16 (core/half.h) convert in software, bit by bit, which is exact but
// costs a dozen integer instructions per element. On the GPU the same round-to-nearest-
// even conversions are single instructions (cvt.rn.f16.f32, cvt.rn.bf16.f32), so kernels
// go through load<T>() / store<T>() here, which use them. The results are identical to
// the host conversions for every non-NaN value; a NaN stays a NaN (its payload may differ).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

#include "core/dtype.h"

namespace kiln::cuda {

template <typename T>
__device__ __forceinline__ opmath_t<T> to_opmath(T v) {
  if constexpr (std::is_same_v<T, Half>) {
    return __half2float(__ushort_as_half(v.bits));
  } else if constexpr (std::is_same_v<T, BFloat16>) {
    return __bfloat162float(__ushort_as_bfloat16(v.bits));
  } else {
    return v;
  }
}

// Rounds an opmath (or any arithmetic) value into storage type T.
template <typename T, typename V>
__device__ __forceinline__ T from_opmath(V v) {
  if constexpr (std::is_same_v<T, Half>) {
    return Half::from_bits(__half_as_ushort(__float2half_rn(static_cast<float>(v))));
  } else if constexpr (std::is_same_v<T, BFloat16>) {
    return BFloat16::from_bits(__bfloat16_as_ushort(__float2bfloat16_rn(static_cast<float>(v))));
  } else if constexpr (std::is_same_v<T, bool>) {
    return static_cast<bool>(v);
  } else {
    return static_cast<T>(v);
  }
}

template <typename T>
__device__ __forceinline__ opmath_t<T> load(const T* p) {
  return to_opmath(*p);
}

template <typename T, typename V>
__device__ __forceinline__ void store(T* p, V v) {
  *p = from_opmath<T>(v);
}

}  // namespace kiln::cuda
