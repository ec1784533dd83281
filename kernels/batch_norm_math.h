// The per-element math of batch norm's elementwise work, shared by the CPU and CUDA
// backends: apply and both backward kernels evaluate the normalised value y with this
// one expression, so the fused ReLU's gradient mask, recomputed from the input in
// backward, is exactly the forward's (Note [Batch norm with ReLU] in core/backend.h).
#pragma once

#include <bit>
#include <cstdint>
#include <type_traits>

#include "core/half.h"  // KILN_HOST_DEVICE

namespace kiln::batch_norm_math {

// Channel c's coefficients: y = (x - mean) scale + shift, scale = invstd weight, shift = bias
// (weight / bias null: 1 / 0).
template <typename V>
struct Channel {
  V mean, scale, shift;
  KILN_HOST_DEVICE V normalize(V x) const { return (x - mean) * scale + shift; }
};

template <typename V>
KILN_HOST_DEVICE inline Channel<V> channel(const V* mean, const V* invstd, const V* weight, const V* bias,
                                           int64_t c) {
  return {mean[c], invstd[c] * (weight ? weight[c] : V(1)), bias ? bias[c] : V(0)};
}

// The output: y, or with the fused ReLU max(y, 0) (a NaN stays NaN, as relu).
template <bool kRelu, typename V>
KILN_HOST_DEVICE inline V output(V y) {
  return kRelu && y < V(0) ? V(0) : y;
}

// The gradient reaching y: grad_out, or with the fused ReLU grad_out where y > 0 and +0
// elsewhere (relu's backward: a NaN y blocks it too). On the host without a branch: GCC
// compiled the select as a jump (a coin toss per value on real data) and then left the
// CPU reduction scalar, 40x slower; clearing grad_out's bits with a mask vectorises.
template <bool kRelu, typename V>
KILN_HOST_DEVICE inline V grad_of_y(V grad_out, V y) {
  if constexpr (!kRelu) {
    return grad_out;
  } else {
#ifdef __CUDA_ARCH__
    return y > V(0) ? grad_out : V(0);
#else
    using Bits = std::conditional_t<sizeof(V) == 4, uint32_t, uint64_t>;
    const Bits keep = Bits{0} - static_cast<Bits>(y > V(0));  // all ones where y > 0
    return std::bit_cast<V>(static_cast<Bits>(std::bit_cast<Bits>(grad_out) & keep));
#endif
  }
}

// Calls fn(std::bool_constant<relu>{}), so kernels take the fused ReLU as a compile-time
// flag: constexpr bool kRelu = decltype(relu_flag)::value.
template <typename F>
void with_relu(bool relu, const F& fn) {
  if (relu) {
    fn(std::true_type{});
  } else {
    fn(std::false_type{});
  }
}

}  // namespace kiln::batch_norm_math
