// CpuBackend batch normalisation for channels-last operands (NDHWC / NHWC): the same four
// pieces and math as kernels/cpu/batch_norm.cpp (Note [Batch norm pieces] in
// core/backend.h), laid out as M = N * S rows of C contiguous values (channel c of row r
// at r * C + c; kernels/channel_layout.h).
//
// Channels are innermost, so every loop runs over a row's C values with per-channel
// arrays beside it: the inner loop is contiguous in the data and in the coefficients, and
// vectorises, instead of a strided walk per channel.
//   Reductions (stats, backward_reduce): the rows are cut into chunks of chunk_rows (a
//     function of the sizes only, never of the thread count); threads take chunks, each
//     chunk sums every channel in double into its own C accumulators (shifted sums for
//     the statistics, as the channels-first kernels: K = the chunk's first row), and each
//     channel's chunk states are merged in chunk order (Chan et al.'s formula for
//     Welford). Deterministic, and the result differs from the channels-first kernels'
//     only in the order of the additions.
//   Elementwise (apply, backward_input): the per-channel coefficients are computed once
//     into arrays, then threads split the rows.
// With relu, y is the shared expression of kernels/batch_norm_math.h, so the mask is the
// forward's (Note [Batch norm with ReLU]); with the fused add the mask is output > 0 and
// backward_reduce writes the masked gradient to grad_y (Note [Batch norm, add and ReLU]).
#include "kernels/cpu/batch_norm_channels_last.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "core/dispatch.h"
#include "kernels/batch_norm_math.h"
#include "kernels/batch_norm_operands.h"
#include "kernels/cpu/elementwise_engine.h"  // parallel_for, kGrain
#include "kernels/reduce_ops.h"              // WelfordState, WelfordOp::combine

namespace kiln::cpu::batch_norm_channels_last {
namespace {

inline constexpr int64_t kChunkValues = 16384;  // values (all channels) a chunk holds, about
inline constexpr int64_t kMinChunkRows = 64;    // so that a chunk's sums stay long for many channels

// [M, C] rows of a channels-last [N, C, *] tensor.
struct Rows {
  int64_t rows = 0, channels = 1;
  int64_t chunk_rows() const { return std::max(kMinChunkRows, kChunkValues / channels); }
  int64_t chunks() const { return std::max<int64_t>(1, (rows + chunk_rows() - 1) / chunk_rows()); }
  int64_t row_grain() const { return std::max<int64_t>(1, kGrain / channels); }
};

Rows rows_of(const Tensor& t) {
  const int64_t c = t.sizes()[1];
  return {c == 0 ? 0 : t.numel() / c, c};
}

using Welford = reduce_ops::WelfordState<double>;

// Runs chunk(k, begin_row, end_row, slots) for every chunk in parallel; slots points at
// the chunk's C entries of the returned [chunks, C] array.
template <typename P, typename Fn>
std::vector<P> reduce_chunks(const Rows& l, const Fn& chunk) {
  std::vector<P> pieces(static_cast<size_t>(l.chunks() * l.channels));
  const int64_t grain = std::max<int64_t>(1, kGrain / (l.chunk_rows() * l.channels));
  parallel_for(l.chunks(), grain, [&](int64_t begin, int64_t end) {
    for (int64_t k = begin; k < end; ++k) {
      const int64_t r0 = k * l.chunk_rows(), r1 = std::min(l.rows, r0 + l.chunk_rows());
      chunk(r0, r1, pieces.data() + k * l.channels);
    }
  });
  return pieces;
}

template <typename T>
void stats_chunk(const T* x, const Rows& l, int64_t r0, int64_t r1, Welford* out) {
  using V = opmath_t<T>;
  const int64_t channels = l.channels;
  if (r1 == r0) return;  // no rows: the identity state
  std::vector<double> shift(static_cast<size_t>(channels)), sum(shift.size(), 0.0), sum_sq(shift.size(), 0.0);
  for (int64_t c = 0; c < channels; ++c) shift[c] = static_cast<double>(static_cast<V>(x[r0 * channels + c]));
  for (int64_t r = r0; r < r1; ++r) {
    const T* row = x + r * channels;
    for (int64_t c = 0; c < channels; ++c) {
      const double d = static_cast<double>(static_cast<V>(row[c])) - shift[c];
      sum[c] += d;
      sum_sq[c] += d * d;
    }
  }
  const double count = static_cast<double>(r1 - r0);
  for (int64_t c = 0; c < channels; ++c) {
    out[c] = {shift[c] + sum[c] / count, std::max(0.0, sum_sq[c] - sum[c] * sum[c] / count), r1 - r0};
  }
}

struct GradSums {
  double dy = 0, dy_xmu = 0;
};

// The per-channel coefficients of y = (x - mean) scale + shift as arrays (weight / bias
// null: 1 / 0), so that the row loops read them contiguously.
template <typename S>
struct ChannelArrays {
  std::vector<S> mean, scale, shift;
  ChannelArrays(const BatchNormCoefficients& norm, int64_t channels) {
    const S* m = static_cast<const S*>(norm.mean.data_ptr());
    const S* is = norm.invstd.defined() ? static_cast<const S*>(norm.invstd.data_ptr()) : nullptr;
    const S* w = norm.weight.defined() ? static_cast<const S*>(norm.weight.data_ptr()) : nullptr;
    const S* b = norm.bias.defined() ? static_cast<const S*>(norm.bias.data_ptr()) : nullptr;
    for (int64_t c = 0; c < channels; ++c) {
      const batch_norm_math::Channel<S> ch =
          is ? batch_norm_math::channel(m, is, w, b, c) : batch_norm_math::Channel<S>{m[c], S(1), S(0)};
      mean.push_back(ch.mean);
      scale.push_back(ch.scale);
      shift.push_back(ch.shift);
    }
  }
  batch_norm_math::Channel<S> operator[](int64_t c) const { return {mean[c], scale[c], shift[c]}; }
};

// in: the operands (its per-channel pointers unused: ch holds the coefficients as arrays).
template <batch_norm_math::Tail kTail, typename T, typename S>
void grad_sums_chunk(const batch_norm_math::GradOperands<T, S>& in, const ChannelArrays<S>& ch, const Rows& l,
                     int64_t r0, int64_t r1, GradSums* out) {
  using batch_norm_math::Tail;
  const int64_t channels = l.channels;
  std::vector<double> sum_dy(static_cast<size_t>(channels), 0.0), sum_dy_xmu(sum_dy.size(), 0.0);
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t row = r * channels;
    for (int64_t c = 0; c < channels; ++c) {
      const S xv = static_cast<S>(in.x[row + c]);
      const S out = kTail == Tail::AddRelu ? static_cast<S>(in.output[row + c]) : S(0);
      const S g = batch_norm_math::grad_at_y<kTail>(ch[c], xv, static_cast<S>(in.dy[row + c]), out);
      if constexpr (kTail == Tail::AddRelu) in.grad_y[row + c] = static_cast<T>(g);
      sum_dy[c] += static_cast<double>(g);
      sum_dy_xmu[c] += static_cast<double>(g) * (static_cast<double>(xv) - ch.mean[c]);
    }
  }
  for (int64_t c = 0; c < channels; ++c) out[c] = {sum_dy[c], sum_dy_xmu[c]};
}

// Runs row(r) for each of the M rows, split over threads.
template <typename Fn>
void for_each_row(const Rows& l, const Fn& row) {
  parallel_for(l.rows, l.row_grain(), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) row(r);
  });
}

}  // namespace

void stats(const Tensor& input, const Tensor& mean, const Tensor& var) {
  const Rows l = rows_of(input);
  if (l.channels == 0) return;
  visit_dtype<kFloatingTypes>(input.dtype(), "batch_norm_stats", [&]<typename T>() {
    using S = opmath_t<T>;
    const T* x = static_cast<const T*>(input.data_ptr());
    const std::vector<Welford> pieces = reduce_chunks<Welford>(
        l, [&](int64_t r0, int64_t r1, Welford* out) { stats_chunk(x, l, r0, r1, out); });
    S* mean_out = static_cast<S*>(mean.data_ptr());
    S* var_out = static_cast<S*>(var.data_ptr());
    const reduce_ops::WelfordOp<T, double> welford{};
    for (int64_t c = 0; c < l.channels; ++c) {
      Welford w{};
      for (int64_t k = 0; k < l.chunks(); ++k) w = welford.combine(w, pieces[k * l.channels + c]);
      mean_out[c] = static_cast<S>(w.count > 0 ? w.mean : std::numeric_limits<double>::quiet_NaN());
      var_out[c] = static_cast<S>(w.m2 / static_cast<double>(w.count));
    }
  });
}

void apply(const Tensor& input, const BatchNormCoefficients& norm, const Tensor& out,
           batch_norm_math::Tail tail) {
  const Rows l = rows_of(input);
  if (l.rows == 0) return;
  visit_dtype<kFloatingTypes>(input.dtype(), "batch_norm_apply", [&]<typename T>() {
    using S = opmath_t<T>;
    const T* x = static_cast<const T*>(input.data_ptr());
    T* y = static_cast<T*>(out.data_ptr());
    const T* residual = data_or_null<T>(norm.residual);
    const ChannelArrays<S> ch(norm, l.channels);
    batch_norm_math::with_tail(
        tail, [&](auto tail_value) {
          constexpr batch_norm_math::Tail kTail = decltype(tail_value)::value;
          for_each_row(l, [&](int64_t r) {
            const int64_t row = r * l.channels;
            for (int64_t c = 0; c < l.channels; ++c) {
              const S res =
                  kTail == batch_norm_math::Tail::AddRelu ? static_cast<S>(residual[row + c]) : S(0);
              y[row + c] = static_cast<T>(
                  batch_norm_math::output<kTail>(ch[c].normalize(static_cast<S>(x[row + c])), res));
            }
          });
        });
  });
}

void backward_reduce(const Tensor& grad_out, const Tensor& input, const BatchNormCoefficients& norm,
                     const Tensor& sum_dy, const Tensor& sum_dy_xmu, const Tensor& grad_y,
                     batch_norm_math::Tail tail) {
  const Rows l = rows_of(input);
  if (l.channels == 0) return;
  visit_dtype<kFloatingTypes>(input.dtype(), "batch_norm_backward_reduce", [&]<typename T>() {
    using S = opmath_t<T>;
    const auto in = grad_operands<T, S>(grad_out, input, norm, grad_y);
    // Unless the ReLU's mask is recomputed only the mean is read (not a plain y's coefficients).
    const BatchNormCoefficients used =
        tail == batch_norm_math::Tail::Relu ? norm : BatchNormCoefficients{.mean = norm.mean};
    const ChannelArrays<S> ch(used, l.channels);
    std::vector<GradSums> pieces;
    batch_norm_math::with_tail(tail, [&](auto tail_value) {
      constexpr batch_norm_math::Tail kTail = decltype(tail_value)::value;
      pieces = reduce_chunks<GradSums>(
          l, [&](int64_t r0, int64_t r1, GradSums* out) { grad_sums_chunk<kTail>(in, ch, l, r0, r1, out); });
    });
    S* out_dy = static_cast<S*>(sum_dy.data_ptr());
    S* out_dy_xmu = static_cast<S*>(sum_dy_xmu.data_ptr());
    for (int64_t c = 0; c < l.channels; ++c) {
      GradSums total;
      for (int64_t k = 0; k < l.chunks(); ++k) {
        total.dy += pieces[k * l.channels + c].dy;
        total.dy_xmu += pieces[k * l.channels + c].dy_xmu;
      }
      out_dy[c] = static_cast<S>(total.dy);
      out_dy_xmu[c] = static_cast<S>(total.dy_xmu);
    }
  });
}

void backward_input(const Tensor& grad_out, const Tensor& input, const BatchNormCoefficients& norm,
                    const Tensor& sum_dy, const Tensor& sum_dy_xmu, int64_t count, const Tensor& grad_in,
                    bool relu) {
  const Rows l = rows_of(input);
  if (l.rows == 0) return;
  visit_dtype<kFloatingTypes>(input.dtype(), "batch_norm_backward_input", [&]<typename T>() {
    using S = opmath_t<T>;
    const T* dy = static_cast<const T*>(grad_out.data_ptr());
    const T* x = static_cast<const T*>(input.data_ptr());
    T* dx = static_cast<T*>(grad_in.data_ptr());
    const S* is = static_cast<const S*>(norm.invstd.data_ptr());
    const S* sdy = static_cast<const S*>(sum_dy.data_ptr());
    const S* sdyx = static_cast<const S*>(sum_dy_xmu.data_ptr());
    const ChannelArrays<S> ch(norm, l.channels);
    const S inv_count = S(1) / static_cast<S>(count);
    std::vector<S> mean_dy(static_cast<size_t>(l.channels)), proj(mean_dy.size());
    for (int64_t c = 0; c < l.channels; ++c) {
      mean_dy[c] = sdy[c] * inv_count;
      proj[c] = sdyx[c] * inv_count * is[c] * is[c];  // (x - mean) coefficient
    }
    batch_norm_math::with_relu(relu, [&](auto relu_flag) {
      constexpr bool kRelu = decltype(relu_flag)::value;
      for_each_row(l, [&](int64_t r) {
        const T* g_row = dy + r * l.channels;
        const T* x_row = x + r * l.channels;
        T* dx_row = dx + r * l.channels;
        for (int64_t c = 0; c < l.channels; ++c) {
          const S xv = static_cast<S>(x_row[c]);
          const S g =
              batch_norm_math::grad_of_y<kRelu>(static_cast<S>(g_row[c]), kRelu ? ch[c].normalize(xv) : S(0));
          dx_row[c] = static_cast<T>((g - mean_dy[c] - (xv - ch.mean[c]) * proj[c]) * ch.scale[c]);
        }
      });
    });
  });
}

}  // namespace kiln::cpu::batch_norm_channels_last
