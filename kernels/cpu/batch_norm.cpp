// CpuBackend batch normalisation pieces (Note [Batch norm pieces] in core/backend.h).
//
// Math, per channel c over its m = N * S values (S = the spatial volume):
//   stats:            mean[c] = sum x / m,  var[c] = sum (x - mean)^2 / m    (biased)
//   apply:            y = (x - mean) * (invstd * weight) + bias   (max(y, 0) with relu,
//                     max(y + residual, 0) with the fused add)
//   backward_reduce:  sum_dy[c] = sum dy,  sum_dy_xmu[c] = sum dy (x - mean)  (and grad_y = dy
//                     with the fused add)
//   backward_input:   dx = (dy - sum_dy / count - (x - mean) invstd^2 sum_dy_xmu / count)
//                          * invstd * weight
// weight / bias undefined mean 1 / 0. With relu, dy is grad_out masked by y > 0, y
// recomputed from x (Note [Batch norm with ReLU] in core/backend.h; the expression is
// kernels/batch_norm_math.h's, and the host build does not contract it into an FMA); with
// the fused add by output > 0 (Note [Batch norm, add and ReLU]).
// Every kernel overwrites its outputs.
//
// Layout: input, grad_out, out, grad_in contiguous [N, C, *], seen as [N, C, S]: channel
// c is N runs of S contiguous values, C * S apart. Channels-last operands (all of them,
// kernels/channel_layout.h) go to batch_norm_channels_last.cpp, which loops over rows of
// C values instead. Per-channel tensors are contiguous [C]
// in the statistics type (float for float/half/bfloat16 input, double for double).
//
// Parallelism and accuracy. The reductions split each channel's N * S values into chunks
// of kChunk (a function of the sizes only, never of the thread count), reduce the (channel,
// chunk) pieces in parallel with OpenMP, then merge each channel's pieces in chunk order,
// so the result is deterministic and a few channels still use every core. A chunk
// accumulates in double for every input type, in 32 interleaved accumulators (sum_pairs):
// shifted sums for the statistics (sum (x - K) and sum (x - K)^2 with K the chunk's first
// value, which vectorise and, shifted, do not cancel), turned into a Welford (count, mean,
// M2) state and merged with Chan et al.'s formula (reduce_ops::WelfordOp::combine); the
// backward sums are plain double sums.
// The elementwise passes split the N * C rows over threads and compute in the input's
// opmath type (float for half types, Note [Opmath]), per-channel coefficients computed once.
#include <algorithm>
#include <array>
#include <limits>
#include <vector>

#include "core/dispatch.h"
#include "kernels/batch_norm_math.h"
#include "kernels/batch_norm_operands.h"
#include "kernels/cpu/batch_norm_channels_last.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/elementwise_engine.h"  // parallel_for, kGrain
#include "kernels/reduce_ops.h"              // WelfordState, WelfordOp::combine

namespace kiln::cpu {
namespace {

inline constexpr int64_t kChunk = 16384;  // values of one channel reduced as one piece

// [N, C, S] view of a contiguous [N, C, *] tensor.
struct ChannelLayout {
  int64_t n = 1, c = 1, s = 1;
  int64_t per_channel() const { return n * s; }
  int64_t chunks() const { return std::max<int64_t>(1, (per_channel() + kChunk - 1) / kChunk); }
};

ChannelLayout layout_of(const Tensor& t) {
  ChannelLayout l{t.sizes()[0], t.sizes()[1], 1};
  for (int64_t d = 2; d < t.dim(); ++d) l.s *= t.sizes()[d];
  return l;
}

// Calls fn(offset, length) for the contiguous runs holding values [begin, end) of channel c.
template <typename Fn>
void for_each_run(const ChannelLayout& l, int64_t c, int64_t begin, int64_t end, const Fn& fn) {
  for (int64_t j = begin; j < end;) {
    const int64_t n = j / l.s, s = j % l.s;
    const int64_t length = std::min(l.s - s, end - j);
    fn((n * l.c + c) * l.s + s, length);
    j += length;
  }
}

// Runs piece(c, begin, end) for every (channel, chunk) in parallel, each into its own
// slot of the returned vector (index c * chunks + chunk).
template <typename P, typename Fn>
std::vector<P> reduce_pieces(const ChannelLayout& l, const Fn& piece) {
  const int64_t chunks = l.chunks(), tasks = l.c * chunks;
  std::vector<P> pieces(static_cast<size_t>(tasks));
  const int64_t grain = std::max<int64_t>(1, kGrain / std::min(kChunk, std::max<int64_t>(1, l.per_channel())));
  parallel_for(tasks, grain, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t c = t / chunks, k = t % chunks;
      pieces[t] = piece(c, k * kChunk, std::min(l.per_channel(), (k + 1) * kChunk));
    }
  });
  return pieces;
}

using Welford = reduce_ops::WelfordState<double>;

// Sums the pairs terms(i) = {a, b} over i in [0, length) in double, in kLanes interleaved
// accumulators: independent add chains the compiler keeps in vector registers (one chain
// would wait on each add's latency), combined in a fixed order. 32 lanes are four AVX-512
// registers of doubles per sum (eight AVX2 ones): with 8 lanes, one register, each add
// waited for the last and the statistics ran at 14 GB/s; with 32, at 24-108 GB/s
// (bench/results/2026-11-25-cpu-train-step.md). The fused ReLU's reduction takes 16: its
// extra work per value (y, the mask) left GCC too few registers for 32 lanes' accumulators,
// which it kept on the stack (0.91 ms on [2, 64, 32^3] against 0.37 ms with 16), while the
// plain reductions with 16 lanes fell back to 14-30 GB/s (measured in
// bench/results/2026-11-26-cpu-memory-bound.md).
template <int kLanes, typename F>
std::array<double, 2> sum_pairs(int64_t length, const F& terms) {
  std::array<double, kLanes> a{}, b{};
  int64_t i = 0;
  for (; i + kLanes <= length; i += kLanes) {
    for (int k = 0; k < kLanes; ++k) {
      const std::array<double, 2> t = terms(i + k);
      a[k] += t[0];
      b[k] += t[1];
    }
  }
  std::array<double, 2> total{};
  for (int k = 0; k < kLanes; ++k) {
    total[0] += a[k];
    total[1] += b[k];
  }
  for (; i < length; ++i) {
    const std::array<double, 2> t = terms(i);
    total[0] += t[0];
    total[1] += t[1];
  }
  return total;
}

template <typename T>
Welford stats_piece(const T* x, const ChannelLayout& l, int64_t c, int64_t begin, int64_t end) {
  using V = opmath_t<T>;
  if (end == begin) return {};
  const double shift = static_cast<V>(x[(begin / l.s * l.c + c) * l.s + begin % l.s]);  // the chunk's first value
  double sum = 0, sum_sq = 0;
  for_each_run(l, c, begin, end, [&](int64_t offset, int64_t length) {
    const std::array<double, 2> s = sum_pairs<32>(length, [&](int64_t i) -> std::array<double, 2> {
      const double d = static_cast<double>(static_cast<V>(x[offset + i])) - shift;
      return {d, d * d};
    });
    sum += s[0];
    sum_sq += s[1];
  });
  const double count = static_cast<double>(end - begin);
  return {shift + sum / count, std::max(0.0, sum_sq - sum * sum / count), end - begin};
}

struct GradSums {
  double dy = 0, dy_xmu = 0;
};

// ch: channel c's coefficients (only its mean unless the ReLU's mask is recomputed).
template <batch_norm_math::Tail kTail, typename T, typename V>
GradSums grad_sums_piece(const batch_norm_math::GradOperands<T, V>& in, const batch_norm_math::Channel<V>& ch,
                         const ChannelLayout& l, int64_t c, int64_t begin, int64_t end) {
  using batch_norm_math::Tail;
  GradSums sums;
  for_each_run(l, c, begin, end, [&](int64_t offset, int64_t length) {
    const T* dy = in.dy + offset;
    const T* x = in.x + offset;
    constexpr int kLanes = kTail == Tail::None ? 32 : 16;  // a masked sum's extra work: see sum_pairs
    const std::array<double, 2> s = sum_pairs<kLanes>(length, [&](int64_t i) -> std::array<double, 2> {
      const V xv = static_cast<V>(x[i]);
      const V out = kTail == Tail::AddRelu ? static_cast<V>(in.output[offset + i]) : V(0);
      const V g = batch_norm_math::grad_at_y<kTail>(ch, xv, static_cast<V>(dy[i]), out);
      if constexpr (kTail == Tail::AddRelu) in.grad_y[offset + i] = static_cast<T>(g);
      return {static_cast<double>(g), static_cast<double>(g) * (static_cast<double>(xv) - ch.mean)};
    });
    sums.dy += s[0];
    sums.dy_xmu += s[1];
  });
  return sums;
}

// Runs row(c, offset) for each of the N * C rows of S values, split over threads.
template <typename Fn>
void for_each_row(const ChannelLayout& l, const Fn& row) {
  const int64_t grain = std::max<int64_t>(1, kGrain / std::max<int64_t>(1, l.s));
  parallel_for(l.n * l.c, grain, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) row(r % l.c, r * l.s);
  });
}

}  // namespace

// ---- launchers --------------------------------------------------------------------------------

void CpuBackend::batch_norm_stats(const Tensor& input, const Tensor& mean, const Tensor& var) {
  if (check_stats(input, mean, var) == ChannelOrder::Last) {
    return batch_norm_channels_last::stats(input, mean, var);
  }
  const ChannelLayout l = layout_of(input);
  if (l.c == 0) return;
  visit_dtype<kFloatingTypes>(input.dtype(), "batch_norm_stats", [&]<typename T>() {
    using S = opmath_t<T>;
    const T* x = static_cast<const T*>(input.data_ptr());
    const auto pieces = reduce_pieces<Welford>(l, [&](int64_t c, int64_t b, int64_t e) { return stats_piece(x, l, c, b, e); });
    S* mean_out = static_cast<S*>(mean.data_ptr());
    S* var_out = static_cast<S*>(var.data_ptr());
    const reduce_ops::WelfordOp<T, double> welford{};
    for (int64_t c = 0; c < l.c; ++c) {
      Welford w{};
      for (int64_t k = 0; k < l.chunks(); ++k) w = welford.combine(w, pieces[c * l.chunks() + k]);
      mean_out[c] = static_cast<S>(w.count > 0 ? w.mean : std::numeric_limits<double>::quiet_NaN());
      var_out[c] = static_cast<S>(w.m2 / static_cast<double>(w.count));
    }
  });
}

void CpuBackend::batch_norm_apply(const Tensor& input, const BatchNormCoefficients& norm, const Tensor& out) {
  const BatchNormCall call = check_apply(input, norm, out);
  if (call.order == ChannelOrder::Last) {
    return batch_norm_channels_last::apply(input, norm, out, call.tail);
  }
  const ChannelLayout l = layout_of(input);
  visit_dtype<kFloatingTypes>(input.dtype(), "batch_norm_apply", [&]<typename T>() {
    using S = opmath_t<T>;
    const T* x = static_cast<const T*>(input.data_ptr());
    T* y = static_cast<T*>(out.data_ptr());
    const T* residual = data_or_null<T>(norm.residual);
    const S *m = data_or_null<S>(norm.mean), *is = data_or_null<S>(norm.invstd);
    const S *w = data_or_null<S>(norm.weight), *b = data_or_null<S>(norm.bias);
    batch_norm_math::with_tail(call.tail, [&](auto tail_value) {
      constexpr batch_norm_math::Tail kTail = decltype(tail_value)::value;
      for_each_row(l, [&](int64_t c, int64_t offset) {
        const batch_norm_math::Channel<S> ch = batch_norm_math::channel(m, is, w, b, c);
        for (int64_t i = offset; i < offset + l.s; ++i) {
          const S r = kTail == batch_norm_math::Tail::AddRelu ? static_cast<S>(residual[i]) : S(0);
          y[i] = static_cast<T>(batch_norm_math::output<kTail>(ch.normalize(static_cast<S>(x[i])), r));
        }
      });
    });
  });
}

void CpuBackend::batch_norm_backward_reduce(const Tensor& grad_out, const Tensor& input,
                                            const BatchNormCoefficients& norm, const Tensor& sum_dy,
                                            const Tensor& sum_dy_xmu, const Tensor& grad_y) {
  const BatchNormCall call = check_backward_reduce(grad_out, input, norm, sum_dy, sum_dy_xmu, grad_y);
  if (call.order == ChannelOrder::Last) {
    return batch_norm_channels_last::backward_reduce(grad_out, input, norm, sum_dy, sum_dy_xmu, grad_y,
                                                     call.tail);
  }
  const ChannelLayout l = layout_of(input);
  if (l.c == 0) return;
  visit_dtype<kFloatingTypes>(input.dtype(), "batch_norm_backward_reduce", [&]<typename T>() {
    using S = opmath_t<T>;
    const auto in = grad_operands<T, S>(grad_out, input, norm, grad_y);
    std::vector<GradSums> pieces;
    batch_norm_math::with_tail(call.tail, [&](auto tail_value) {
      constexpr batch_norm_math::Tail kTail = decltype(tail_value)::value;
      pieces = reduce_pieces<GradSums>(l, [&](int64_t c, int64_t begin, int64_t end) {
        return grad_sums_piece<kTail>(in, batch_norm_math::grad_channel<kTail>(in, c), l, c, begin, end);
      });
    });
    S* out_dy = static_cast<S*>(sum_dy.data_ptr());
    S* out_dy_xmu = static_cast<S*>(sum_dy_xmu.data_ptr());
    for (int64_t c = 0; c < l.c; ++c) {
      GradSums total;
      for (int64_t k = 0; k < l.chunks(); ++k) {
        total.dy += pieces[c * l.chunks() + k].dy;
        total.dy_xmu += pieces[c * l.chunks() + k].dy_xmu;
      }
      out_dy[c] = static_cast<S>(total.dy);
      out_dy_xmu[c] = static_cast<S>(total.dy_xmu);
    }
  });
}

void CpuBackend::batch_norm_backward_input(const Tensor& grad_out, const Tensor& input,
                                           const BatchNormCoefficients& norm, const Tensor& sum_dy,
                                           const Tensor& sum_dy_xmu, int64_t count, const Tensor& grad_in) {
  const BatchNormCall call = check_backward_input(grad_out, input, norm, sum_dy, sum_dy_xmu, count, grad_in);
  const bool relu = call.tail == batch_norm_math::Tail::Relu;
  if (call.order == ChannelOrder::Last) {
    return batch_norm_channels_last::backward_input(grad_out, input, norm, sum_dy, sum_dy_xmu, count, grad_in,
                                                    relu);
  }
  const ChannelLayout l = layout_of(input);
  visit_dtype<kFloatingTypes>(input.dtype(), "batch_norm_backward_input", [&]<typename T>() {
    using S = opmath_t<T>;
    const T* dy = static_cast<const T*>(grad_out.data_ptr());
    const T* x = static_cast<const T*>(input.data_ptr());
    T* dx = static_cast<T*>(grad_in.data_ptr());
    const S *m = data_or_null<S>(norm.mean), *is = data_or_null<S>(norm.invstd);
    const S *w = data_or_null<S>(norm.weight), *b = data_or_null<S>(norm.bias);
    const S *sdy = data_or_null<S>(sum_dy), *sdyx = data_or_null<S>(sum_dy_xmu);
    const S inv_count = S(1) / static_cast<S>(count);
    batch_norm_math::with_relu(relu, [&](auto relu_flag) {
      constexpr bool kRelu = decltype(relu_flag)::value;
      for_each_row(l, [&](int64_t c, int64_t offset) {
        const batch_norm_math::Channel<S> ch = batch_norm_math::channel(m, is, w, b, c);
        const S mean_dy = sdy[c] * inv_count;
        const S proj = sdyx[c] * inv_count * is[c] * is[c];  // (x - mean) coefficient
        for (int64_t i = offset; i < offset + l.s; ++i) {
          const S xv = static_cast<S>(x[i]);
          const S g = batch_norm_math::grad_of_y<kRelu>(static_cast<S>(dy[i]), kRelu ? ch.normalize(xv) : S(0));
          dx[i] = static_cast<T>((g - mean_dy - (xv - ch.mean) * proj) * ch.scale);
        }
      });
    });
  });
}

}  // namespace kiln::cpu
