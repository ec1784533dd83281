// What batch norm's two per-channel reductions compute, shared by the reducers of both
// layouts (batch_norm.cu: [N, C, S] rows; batch_norm_channels_last.cu: [M, C] rows):
// the state, its identity and combine, where a channel's result is written, and the
// per-value step of the backward sums. Each layout's reducer derives from StatsOutput or
// GradSumsOutput and adds only how it walks its operands (add; Note [Batch norm pieces]
// and Note [Batch norm, add and ReLU] in core/backend.h).
#pragma once

#include <cstdint>
#include <limits>

#include "kernels/batch_norm_math.h"
#include "kernels/cuda/cuda_types.cuh"
#include "kernels/reduce_ops.h"  // WelfordState, WelfordOp

namespace kiln::cuda {

// Statistics: a Welford state per channel, written as the mean and the biased variance
// (NaN mean and variance for an empty channel, as the CPU).
template <typename T>
struct StatsOutput {
  using V = opmath_t<T>;
  using State = reduce_ops::WelfordState<V>;
  V* mean_out;
  V* var_out;
  __device__ State identity() const { return {}; }
  __device__ State combine(State a, State b) const { return reduce_ops::WelfordOp<T, V>{}.combine(a, b); }
  __device__ void write(const State& s, int64_t c) const {
    mean_out[c] = s.count > 0 ? s.mean : std::numeric_limits<V>::quiet_NaN();
    var_out[c] = s.m2 / static_cast<V>(s.count);
  }
};

template <typename V>
struct GradSums {
  V dy = 0, dy_xmu = 0;
};

// Backward: sum_dy[c] and sum_dy_xmu[c].
template <typename T>
struct GradSumsOutput {
  using V = opmath_t<T>;
  using State = GradSums<V>;
  V* sum_dy;
  V* sum_dy_xmu;
  __device__ State identity() const { return {}; }
  __device__ State combine(State a, State b) const { return {a.dy + b.dy, a.dy_xmu + b.dy_xmu}; }
  __device__ void write(const State& s, int64_t c) const {
    sum_dy[c] = s.dy;
    sum_dy_xmu[c] = s.dy_xmu;
  }
};

// Folds one value into the backward sums: dy = grad_out masked as kTail says (by y
// recomputed from x, or by the fused add's output), returned for grad_y.
template <batch_norm_math::Tail kTail, typename V>
__device__ __forceinline__ V fold_grad(GradSums<V>& s, const batch_norm_math::Channel<V>& ch, V x, V grad_out,
                                       V output) {
  const V g = batch_norm_math::grad_at_y<kTail>(ch, x, grad_out, output);
  s.dy += g;
  s.dy_xmu += g * (x - ch.mean);
  return g;
}

}  // namespace kiln::cuda
