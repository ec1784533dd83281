// The per-element math of batch norm's elementwise work, shared by the CPU and CUDA
// backends: apply and both backward kernels evaluate the normalised value y with this
// one expression, so the fused ReLU's gradient mask, recomputed from the input in
// backward, is exactly the forward's (Note [Batch norm with ReLU] in core/backend.h);
// the fused residual add's mask is read from its output instead (Note [Batch norm, add
// and ReLU]).
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

// What follows the normalisation in a kernel: nothing, the fused ReLU (Note [Batch norm
// with ReLU]), or a residual add and the ReLU (Note [Batch norm, add and ReLU]).
enum class Tail { None, Relu, AddRelu };

inline Tail tail_of(bool relu, bool add) { return add ? Tail::AddRelu : relu ? Tail::Relu : Tail::None; }

// The output: y, max(y, 0), or max(y + residual, 0) (a NaN stays NaN, as relu).
template <Tail kTail, typename V>
KILN_HOST_DEVICE inline V output(V y, V residual) {
  if constexpr (kTail == Tail::AddRelu) y += residual;
  return kTail != Tail::None && y < V(0) ? V(0) : y;
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

// The operands of a backward reduction as raw pointers, for both backends and layouts:
// grad_out and the input, with the fused add the forward's output (the mask) and grad_y
// (written); the per-channel coefficients (invstd, weight and bias read only when the
// ReLU's mask is recomputed from y). Null where absent. batch_norm_operands.h makes one.
template <typename T, typename V>
struct GradOperands {
  const T* dy;
  const T* x;
  const T* output;
  T* grad_y;
  const V* mean;
  const V* invstd;
  const V* weight;
  const V* bias;
};

// Calls fn(std::bool_constant<relu>{}), for a kernel whose only choice is the ReLU's
// mask (backward_input): constexpr bool kRelu = decltype(relu_flag)::value.
template <typename F>
void with_relu(bool relu, const F& fn) {
  if (relu) {
    fn(std::true_type{});
  } else {
    fn(std::false_type{});
  }
}

// Calls fn(std::integral_constant<Tail, tail>{}), so kernels take the tail as a
// compile-time value: constexpr Tail kTail = decltype(tail_value)::value.
template <typename F>
void with_tail(Tail tail, const F& fn) {
  switch (tail) {
    case Tail::None:
      return fn(std::integral_constant<Tail, Tail::None>{});
    case Tail::Relu:
      return fn(std::integral_constant<Tail, Tail::Relu>{});
    case Tail::AddRelu:
      return fn(std::integral_constant<Tail, Tail::AddRelu>{});
  }
}

// The gradient at y of one value in a backward reduction: grad_out masked as kTail says,
// by y recomputed from x (Relu) or by the fused add's output (AddRelu; unused otherwise).
template <Tail kTail, typename V>
KILN_HOST_DEVICE inline V grad_at_y(const Channel<V>& ch, V x, V grad_out, V output) {
  V mask_source = V(0);
  if constexpr (kTail == Tail::Relu) mask_source = ch.normalize(x);
  if constexpr (kTail == Tail::AddRelu) mask_source = output;
  return grad_of_y<kTail != Tail::None>(grad_out, mask_source);
}

// The coefficients a backward reduction needs of channel c: all of them when kTail
// recomputes the ReLU's mask from y, else only the mean.
template <Tail kTail, typename T, typename V>
KILN_HOST_DEVICE inline Channel<V> grad_channel(const GradOperands<T, V>& in, int64_t c) {
  if constexpr (kTail == Tail::Relu) return channel(in.mean, in.invstd, in.weight, in.bias, c);
  return {in.mean[c], V(1), V(0)};
}

}  // namespace kiln::batch_norm_math
