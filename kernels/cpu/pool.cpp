// CpuBackend pooling: max (with argmax indices), average and adaptive average, forward
// and backward, over 1-3 spatial dims.
//
// Math, per output window W (Note [Pool geometry] in core/pool_geometry.h: every pooling
// is seen as 3-d over planes = N C volumes):
//   max:      y = max_{i in W} x_i, index = argmax (a flat offset in the plane's volume).
//             A NaN wins (the first NaN in window order); among equal values the first
//             in window order (d, then h, then w) wins; padding and dilation gaps are
//             skipped, never compared. A window with no tap inside the input (possible
//             only with dilation) gives -inf and index -1.
//   avg:      y = sum_{i in W} x_i / divisor (Note [Average pooling divisor]).
//   adaptive: y = mean over Note [Adaptive windows].
// Backward (overwrites grad_in, =):
//   max:      grad_in_i = sum of grad_out over the windows whose index is i.
//   avg:      grad_in_i = sum over the windows W containing i of grad_out_W / divisor_W.
// Max backward scatters one plane serially into a zeroed accumulator, in output order;
// average backward gathers (Note [Row-wise average pooling]); both are deterministic.
//
// Layout: input, output, indices and gradients contiguous [N, C, s...], or all
// channels-last, which go to pool_channels_last.cpp (the op layer makes them one or the
// other). Planes are split over OpenMP threads (about kGrain elements of work a
// chunk). Float16/BFloat16 compute in float32 and round once on store (Note [Opmath]).
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "core/dispatch.h"
#include "core/pool_geometry.h"
#include "kernels/channel_layout.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/elementwise_engine.h"  // parallel_for, kGrain
#include "kernels/cpu/pool_channels_last.h"
#include "kernels/cpu/pool_windows.h"

namespace kiln::cpu {
namespace {

// ---- kernels: one plane each ----------------------------------------------------------------

// Note [Separable max pooling]: a max over a box is a max along w, then along h, then
// along d, and so is its argmax: window order is lexicographic in (d, h, w), so keeping the
// first winner at each stage keeps the first winner of the box, and a NaN, once a stage
// picks it, wins every later stage (the first NaN in window order). A 3x3x3 window then
// costs 3 + 3 + 3 comparisons per output instead of 27, each input read about 3 times
// instead of 27 / (stride^3). The stages go through two per-thread buffers of candidates
// (values and flat input indices as two arrays): along w for every input row, then along
// h. Every stage updates a whole row of out_w running maxima by one tap at a time
// (offer_row, pool_windows.h), so the update vectorises: along w each tap is first
// gathered into a row (RowTaps: the tap's column for every output, clamped into the row,
// and -1 as its index where the tap falls in padding). As one candidate per window, with
// the taps of each window visited in turn, the stages ran at about 1 GB/s
// ([8, 64, 32^3], 3x3x3 stride 2: 67 ms, against 23 ms by rows; rows shorter than
// kMinRowForRowUpdates still go window by window; bench/results/2026-12-02-cpu-fused-tail-
// and-step-table.md).

// Along w, tap t of every output ow: the input column it reads (0 where it falls in
// padding or a dilation gap, so that every read is in the row) and the column as a tap
// (-1 there: no candidate). Computed once per call.
struct RowTaps {
  int64_t kernel = 0, out_w = 0;
  std::vector<int64_t> column;  // [kernel][out_w]
  std::vector<int64_t> tap;     // [kernel][out_w]
  RowTaps(const PoolGeometry& g, const AxisTaps& taps) : kernel(g.kernel[2]), out_w(g.out[2]) {
    for (int64_t t = 0; t < kernel; ++t) {
      for (int64_t ow = 0; ow < out_w; ++ow) {
        const bool is_tap = t >= taps.first[ow] && t < taps.last[ow];
        column.push_back(is_tap ? taps.at(ow, t) : 0);
        tap.push_back(is_tap ? taps.at(ow, t) : -1);
      }
    }
  }
};

// One thread's rows of candidates (Note [Separable max pooling]).
template <typename V>
struct MaxPoolScratch {
  std::vector<V> w_value, h_value, tap_value, d_value;
  std::vector<int64_t> w_index, h_index, tap_index, d_index;
  void resize(const PoolGeometry& g) {
    const auto w_size = static_cast<size_t>(g.in[0] * g.in[1] * g.out[2]);
    const auto h_size = static_cast<size_t>(g.in[0] * g.out[1] * g.out[2]);
    const auto row = static_cast<size_t>(g.out[2]);
    w_value.resize(w_size), w_index.resize(w_size), h_value.resize(h_size), h_index.resize(h_size);
    tap_value.resize(row), tap_index.resize(row), d_value.resize(row), d_index.resize(row);
  }
};

// n running maxima with nothing offered yet.
template <typename V>
void clear_maxima(V* best, int64_t* where, int64_t n) {
  std::fill(best, best + n, -std::numeric_limits<V>::infinity());
  std::fill(where, where + n, int64_t{-1});
}

// Rows of fewer outputs than this go window by window (max_pool_fwd_by_window): a row
// update of two or four values costs more than it saves ([8, 512, 4^3], out_w = 2: 1.05
// ms by window, 1.8-2.3 ms by rows).
inline constexpr int64_t kMinRowForRowUpdates = 8;

// The same three stages, one window at a time with each stage's taps in turn (scalar).
template <typename T>
void max_pool_fwd_by_window(const T* x, T* y, int64_t* indices, const PoolGeometry& g,
                            const AxisTaps (&taps)[3], MaxPoolScratch<opmath_t<T>>& s) {
  using V = opmath_t<T>;
  const int64_t in_d = g.in[0], in_h = g.in[1], in_w = g.in[2];
  const int64_t out_d = g.out[0], out_h = g.out[1], out_w = g.out[2];
  clear_maxima(s.w_value.data(), s.w_index.data(), in_d * in_h * out_w);
  clear_maxima(s.h_value.data(), s.h_index.data(), in_d * out_h * out_w);
  for (int64_t row = 0; row < in_d * in_h; ++row) {  // along w
    for (int64_t ow = 0; ow < out_w; ++ow) {
      const int64_t at = row * out_w + ow;
      for (int64_t t = taps[2].first[ow]; t < taps[2].last[ow]; ++t) {
        const int64_t i = row * in_w + taps[2].at(ow, t);
        offer(s.w_value[at], s.w_index[at], static_cast<V>(x[i]), i);
      }
    }
  }
  for (int64_t d = 0; d < in_d; ++d) {  // along h
    for (int64_t oh = 0; oh < out_h; ++oh) {
      for (int64_t ow = 0; ow < out_w; ++ow) {
        const int64_t at = (d * out_h + oh) * out_w + ow;
        for (int64_t t = taps[1].first[oh]; t < taps[1].last[oh]; ++t) {
          const int64_t from = (d * in_h + taps[1].at(oh, t)) * out_w + ow;
          offer(s.h_value[at], s.h_index[at], s.w_value[from], s.w_index[from]);
        }
      }
    }
  }
  for (int64_t od = 0; od < out_d; ++od) {  // along d, into the output
    for (int64_t oh = 0; oh < out_h; ++oh) {
      for (int64_t ow = 0; ow < out_w; ++ow) {
        V best = -std::numeric_limits<V>::infinity();
        int64_t where = -1;
        for (int64_t t = taps[0].first[od]; t < taps[0].last[od]; ++t) {
          const int64_t from = (taps[0].at(od, t) * out_h + oh) * out_w + ow;
          offer(best, where, s.h_value[from], s.h_index[from]);
        }
        const int64_t flat = (od * out_h + oh) * out_w + ow;
        y[flat] = static_cast<T>(best);
        indices[flat] = where;
      }
    }
  }
}

template <typename T>
void max_pool_fwd(const T* x, T* y, int64_t* indices, const PoolGeometry& g, const AxisTaps (&taps)[3],
                  const RowTaps& row_taps, MaxPoolScratch<opmath_t<T>>& s) {
  using V = opmath_t<T>;
  const int64_t in_d = g.in[0], in_h = g.in[1], in_w = g.in[2];
  const int64_t out_d = g.out[0], out_h = g.out[1], out_w = g.out[2];
  if (out_w < kMinRowForRowUpdates) return max_pool_fwd_by_window(x, y, indices, g, taps, s);
  for (int64_t row = 0; row < in_d * in_h; ++row) {  // every input row (d, h): along w
    V* best = s.w_value.data() + row * out_w;
    int64_t* where = s.w_index.data() + row * out_w;
    clear_maxima(best, where, out_w);
    const T* x_row = x + row * in_w;
    for (int64_t t = 0; t < row_taps.kernel && in_w > 0; ++t) {  // an empty row has no taps
      const int64_t* column = row_taps.column.data() + t * out_w;
      const int64_t* tap = row_taps.tap.data() + t * out_w;
      for (int64_t ow = 0; ow < out_w; ++ow) {
        s.tap_value[ow] = static_cast<V>(x_row[column[ow]]);
        s.tap_index[ow] = tap[ow] < 0 ? int64_t{-1} : row * in_w + tap[ow];
      }
      offer_row(best, where, s.tap_value.data(), s.tap_index.data(), out_w);
    }
  }
  for (int64_t d = 0; d < in_d; ++d) {  // along h
    for (int64_t oh = 0; oh < out_h; ++oh) {
      const int64_t at = (d * out_h + oh) * out_w;
      clear_maxima(s.h_value.data() + at, s.h_index.data() + at, out_w);
      for (int64_t t = taps[1].first[oh]; t < taps[1].last[oh]; ++t) {
        const int64_t from = (d * in_h + taps[1].at(oh, t)) * out_w;
        offer_row(s.h_value.data() + at, s.h_index.data() + at, s.w_value.data() + from,
                  s.w_index.data() + from, out_w);
      }
    }
  }
  for (int64_t od = 0; od < out_d; ++od) {  // along d, into the output
    for (int64_t oh = 0; oh < out_h; ++oh) {
      clear_maxima(s.d_value.data(), s.d_index.data(), out_w);
      for (int64_t t = taps[0].first[od]; t < taps[0].last[od]; ++t) {
        const int64_t from = (taps[0].at(od, t) * out_h + oh) * out_w;
        offer_row(s.d_value.data(), s.d_index.data(), s.h_value.data() + from, s.h_index.data() + from,
                  out_w);
      }
      const int64_t flat = (od * out_h + oh) * out_w;
      for (int64_t ow = 0; ow < out_w; ++ow) {
        y[flat + ow] = static_cast<T>(s.d_value[ow]);
        indices[flat + ow] = s.d_index[ow];
      }
    }
  }
}

template <typename T>
void max_pool_bwd(const T* gy, const int64_t* indices, T* gx, std::vector<opmath_t<T>>& acc,
                  const PoolGeometry& g) {
  std::fill(acc.begin(), acc.end(), opmath_t<T>(0));
  const int64_t outputs = g.out_volume();
  for (int64_t o = 0; o < outputs; ++o) {
    if (indices[o] >= 0) acc[indices[o]] += static_cast<opmath_t<T>>(gy[o]);
  }
  for (size_t i = 0; i < acc.size(); ++i) gx[i] = static_cast<T>(acc[i]);
}

// Note [Row-wise average pooling]: an average window is a box, so its sum is a sum of the
// box's input rows (d, h), then of the window's span along w of that row sum. The
// row-wise forward adds the box's rows into one row buffer (contiguous adds that
// vectorise) and reads each output's span from it. The row-wise backward, its transpose,
// gathers: each input row (d, h) adds up the rows of shares (grad_out / divisor) of the
// outputs (od, oh) whose windows hold it (windows along a dim are monotone in the output
// index, so those outputs are a range), then spreads each output's share over its span
// along w; every grad_in element is written once. The direct kernels sum each output's
// box in place and scatter its share into a zeroed accumulator; they win on short rows,
// where the row-wise kernels' per-row work dominates, and the direct scatter also wins
// for wide windows (global pooling), whose innermost loop then vectorises.
// row_wise_forward/backward choose by measurement (bench/results/2026-11-26-cpu-memory-bound.md).
// Both take the per-dim windows, divisor factors and covering ranges from AvgAxis
// (pool_windows.h), computed once per call instead of once per output.

// Which kernels a call takes, measured on [8, C, s^3] for s = 4 to 32 with 2x2x2 and
// global windows. Forward: row-wise unless rows are shorter than 8, where per-row work
// outweighs it (the direct sum along w cannot vectorise: a float reduction is not
// reassociated). Backward: the direct scatter vectorises along w, so it wins for wide
// windows (global pooling) and short rows; row-wise only for rows of 16 or more and
// windows about 4 wide or less.
bool row_wise_forward(const PoolGeometry& g) { return g.in[2] >= 8; }
bool row_wise_backward(const PoolGeometry& g) { return g.in[2] >= 16 && g.in[2] <= 4 * g.out[2]; }

// Calls fn(flat, od, oh, ow) for every output of a plane, in order.
template <typename Fn>
void for_each_window(const PoolGeometry& g, const Fn& fn) {
  for (int64_t od = 0, flat = 0; od < g.out[0]; ++od) {
    for (int64_t oh = 0; oh < g.out[1]; ++oh) {
      for (int64_t ow = 0; ow < g.out[2]; ++ow, ++flat) fn(flat, od, oh, ow);
    }
  }
}

// Calls fn(offset of input row (d, h)) for the rows of output (od, oh)'s box.
template <typename Fn>
void for_each_box_row(const PoolGeometry& g, const AvgAxis (&axes)[3], int64_t od, int64_t oh, const Fn& fn) {
  const PoolRange &rd = axes[0].window[od], &rh = axes[1].window[oh];
  for (int64_t d = rd.begin; d < rd.end; ++d) {
    for (int64_t h = rh.begin; h < rh.end; ++h) fn((d * g.in[1] + h) * g.in[2]);
  }
}

// The direct kernels, for short rows (Note [Row-wise average pooling]): each output sums
// its box in place; backward scatters each output's share into a zeroed accumulator of
// the plane, in output order.
template <typename T>
void avg_pool_fwd_direct(const T* x, T* y, const PoolGeometry& g, const AvgAxis (&axes)[3]) {
  using V = opmath_t<T>;
  for_each_window(g, [&](int64_t flat, int64_t od, int64_t oh, int64_t ow) {
    const PoolRange& rw = axes[2].window[ow];
    V sum = 0;
    for_each_box_row(g, axes, od, oh, [&](int64_t row) {
      for (int64_t w = rw.begin; w < rw.end; ++w) sum += static_cast<V>(x[row + w]);
    });
    const int64_t divisor = avg_divisor(g, axes, od, oh, ow);
    y[flat] = static_cast<T>(divisor == 0 ? V(0) : sum / static_cast<V>(divisor));
  });
}

template <typename T>
void avg_pool_bwd_direct(const T* gy, T* gx, const PoolGeometry& g, const AvgAxis (&axes)[3],
                         std::vector<opmath_t<T>>& acc) {
  using V = opmath_t<T>;
  acc.assign(static_cast<size_t>(g.in_volume()), V(0));
  for_each_window(g, [&](int64_t flat, int64_t od, int64_t oh, int64_t ow) {
    const PoolRange& rw = axes[2].window[ow];
    const int64_t divisor = avg_divisor(g, axes, od, oh, ow);
    if (divisor == 0) return;
    const V share = static_cast<V>(gy[flat]) / static_cast<V>(divisor);
    for_each_box_row(g, axes, od, oh, [&](int64_t row) {
      for (int64_t w = rw.begin; w < rw.end; ++w) acc[row + w] += share;
    });
  });
  for (size_t i = 0; i < acc.size(); ++i) gx[i] = static_cast<T>(acc[i]);
}

template <typename T>
void avg_pool_fwd(const T* x, T* y, const PoolGeometry& g, const AvgAxis (&axes)[3], std::vector<opmath_t<T>>& row) {
  using V = opmath_t<T>;
  const int64_t in_w = g.in[2];
  row.resize(static_cast<size_t>(in_w));
  for (int64_t od = 0; od < g.out[0]; ++od) {
    for (int64_t oh = 0; oh < g.out[1]; ++oh) {
      std::fill(row.begin(), row.end(), V(0));
      for_each_box_row(g, axes, od, oh, [&](int64_t offset) {
        for (int64_t w = 0; w < in_w; ++w) row[w] += static_cast<V>(x[offset + w]);
      });
      T* out_row = y + (od * g.out[1] + oh) * g.out[2];
      for (int64_t ow = 0; ow < g.out[2]; ++ow) {
        const PoolRange& rw = axes[2].window[ow];
        V sum = 0;
        for (int64_t w = rw.begin; w < rw.end; ++w) sum += row[w];
        const int64_t divisor = avg_divisor(g, axes, od, oh, ow);
        out_row[ow] = static_cast<T>(divisor == 0 ? V(0) : sum / static_cast<V>(divisor));
      }
    }
  }
}

// Scratch (per thread): shares (out_volume), row (out_w), line (in_w).
template <typename T>
void avg_pool_bwd(const T* gy, T* gx, const PoolGeometry& g, const AvgAxis (&axes)[3],
                  std::vector<opmath_t<T>>& shares, std::vector<opmath_t<T>>& row, std::vector<opmath_t<T>>& line) {
  using V = opmath_t<T>;
  const int64_t out_h = g.out[1], out_w = g.out[2], in_w = g.in[2];
  shares.resize(static_cast<size_t>(g.out_volume()));
  row.resize(static_cast<size_t>(out_w));
  line.resize(static_cast<size_t>(in_w));
  for_each_window(g, [&](int64_t flat, int64_t od, int64_t oh, int64_t ow) {
    const int64_t divisor = avg_divisor(g, axes, od, oh, ow);
    shares[flat] = divisor == 0 ? V(0) : static_cast<V>(gy[flat]) / static_cast<V>(divisor);
  });
  for (int64_t d = 0; d < g.in[0]; ++d) {
    const int64_t od_first = axes[0].first[d], od_last = axes[0].last[d];
    for (int64_t h = 0; h < g.in[1]; ++h) {
      const int64_t oh_first = axes[1].first[h], oh_last = axes[1].last[h];
      std::fill(line.begin(), line.end(), V(0));
      // The sum of the share rows of the windows holding row (d, h); without a copy when
      // one window does (windows that do not overlap).
      const V* sum_row = row.data();
      if ((od_last - od_first) * (oh_last - oh_first) == 1) {
        sum_row = shares.data() + (od_first * out_h + oh_first) * out_w;
      } else {
        std::fill(row.begin(), row.end(), V(0));
        for (int64_t od = od_first; od < od_last; ++od) {
          for (int64_t oh = oh_first; oh < oh_last; ++oh) {
            const V* share_row = shares.data() + (od * out_h + oh) * out_w;
            for (int64_t ow = 0; ow < out_w; ++ow) row[ow] += share_row[ow];
          }
        }
      }
      for (int64_t ow = 0; ow < out_w; ++ow) {  // each output's share to its span along w
        const PoolRange& rw = axes[2].window[ow];
        for (int64_t w = rw.begin; w < rw.end; ++w) line[w] += sum_row[ow];
      }
      T* in_row = gx + (d * g.in[1] + h) * in_w;
      for (int64_t w = 0; w < in_w; ++w) in_row[w] = static_cast<T>(line[w]);
    }
  }
}

// ---- shared launch code -----------------------------------------------------------------------

void avg_forward(const Tensor& input, const Tensor& out, const PoolGeometry& g, bool adaptive, const char* op) {
  if (check_pool_operands(input, out, nullptr, op))
    return pool_channels_last::avg_forward(input, out, g, adaptive);
  const AvgAxis axes[3] = {AvgAxis(g, 0, adaptive), AvgAxis(g, 1, adaptive), AvgAxis(g, 2, adaptive)};
  const bool row_wise = row_wise_forward(g);
  visit_dtype<kFloatingTypes>(input.dtype(), op, [&]<typename T>() {
    const T* x = static_cast<const T*>(input.data_ptr());
    T* y = static_cast<T*>(out.data_ptr());
    const int64_t in_volume = g.in_volume(), out_volume = g.out_volume();
    const int64_t grain = std::max<int64_t>(1, kGrain / std::max<int64_t>(1, in_volume + out_volume));
    parallel_for(g.planes, grain, [&](int64_t begin, int64_t end) {
      std::vector<opmath_t<T>> row;
      for (int64_t p = begin; p < end; ++p) {
        if (row_wise) {
          avg_pool_fwd(x + p * in_volume, y + p * out_volume, g, axes, row);
        } else {
          avg_pool_fwd_direct(x + p * in_volume, y + p * out_volume, g, axes);
        }
      }
    });
  });
}

void avg_backward(const Tensor& grad_out, const Tensor& grad_in, const PoolGeometry& g, bool adaptive,
                  const char* op) {
  if (check_pool_operands(grad_in, grad_out, nullptr, op))
    return pool_channels_last::avg_backward(grad_out, grad_in, g, adaptive);
  const AvgAxis axes[3] = {AvgAxis(g, 0, adaptive), AvgAxis(g, 1, adaptive), AvgAxis(g, 2, adaptive)};
  const bool row_wise = row_wise_backward(g);
  visit_dtype<kFloatingTypes>(grad_in.dtype(), op, [&]<typename T>() {
    const T* gy = static_cast<const T*>(grad_out.data_ptr());
    T* gx = static_cast<T*>(grad_in.data_ptr());
    const int64_t in_volume = g.in_volume(), out_volume = g.out_volume();
    const int64_t grain = std::max<int64_t>(1, kGrain / std::max<int64_t>(1, in_volume + out_volume));
    parallel_for(g.planes, grain, [&](int64_t begin, int64_t end) {
      std::vector<opmath_t<T>> shares, row, line;
      for (int64_t p = begin; p < end; ++p) {
        if (row_wise) {
          avg_pool_bwd(gy + p * out_volume, gx + p * in_volume, g, axes, shares, row, line);
        } else {
          avg_pool_bwd_direct(gy + p * out_volume, gx + p * in_volume, g, axes, line);
        }
      }
    });
  });
}

}  // namespace

// ---- launchers --------------------------------------------------------------------------------

void CpuBackend::max_pool_forward(const Tensor& input, const PoolParams& params, const Tensor& out,
                                  const Tensor& indices) {
  const bool channels_last = check_pool_operands(input, out, &indices, "max_pool_forward");
  const PoolGeometry g = pool_geometry(input.sizes(), out.sizes(), params);
  if (channels_last) return pool_channels_last::max_forward(input, g, out, indices);
  visit_dtype<kFloatingTypes>(input.dtype(), "max_pool_forward", [&]<typename T>() {
    const T* x = static_cast<const T*>(input.data_ptr());
    T* y = static_cast<T*>(out.data_ptr());
    int64_t* idx = static_cast<int64_t*>(indices.data_ptr());
    const int64_t in_volume = g.in_volume(), out_volume = g.out_volume();
    const AxisTaps taps[3] = {AxisTaps(g, 0), AxisTaps(g, 1), AxisTaps(g, 2)};
    const RowTaps row_taps(g, taps[2]);
    const int64_t work = in_volume + out_volume * (g.kernel[0] + g.kernel[1] + g.kernel[2]);
    parallel_for(g.planes, std::max<int64_t>(1, kGrain / std::max<int64_t>(1, work)),
                 [&](int64_t begin, int64_t end) {
                   MaxPoolScratch<opmath_t<T>> scratch;
                   scratch.resize(g);
                   for (int64_t p = begin; p < end; ++p) {
                     max_pool_fwd(x + p * in_volume, y + p * out_volume, idx + p * out_volume, g, taps,
                                  row_taps, scratch);
                   }
                 });
  });
}

void CpuBackend::max_pool_backward(const Tensor& grad_out, const Tensor& indices, const PoolParams& params,
                                   const Tensor& grad_in) {
  const bool channels_last = check_pool_operands(grad_in, grad_out, &indices, "max_pool_backward");
  const PoolGeometry g = pool_geometry(grad_in.sizes(), grad_out.sizes(), params);
  if (channels_last) return pool_channels_last::max_backward(grad_out, indices, g, grad_in);
  visit_dtype<kFloatingTypes>(grad_in.dtype(), "max_pool_backward", [&]<typename T>() {
    const T* gy = static_cast<const T*>(grad_out.data_ptr());
    const int64_t* idx = static_cast<const int64_t*>(indices.data_ptr());
    T* gx = static_cast<T*>(grad_in.data_ptr());
    const int64_t in_volume = g.in_volume(), out_volume = g.out_volume();
    const int64_t grain = std::max<int64_t>(1, kGrain / std::max<int64_t>(1, in_volume + out_volume));
    parallel_for(g.planes, grain, [&](int64_t begin, int64_t end) {
      std::vector<opmath_t<T>> acc(static_cast<size_t>(in_volume));
      for (int64_t p = begin; p < end; ++p) {
        max_pool_bwd(gy + p * out_volume, idx + p * out_volume, gx + p * in_volume, acc, g);
      }
    });
  });
}

void CpuBackend::avg_pool_forward(const Tensor& input, const PoolParams& params, const Tensor& out) {
  avg_forward(input, out, pool_geometry(input.sizes(), out.sizes(), params), /*adaptive=*/false, "avg_pool_forward");
}

void CpuBackend::avg_pool_backward(const Tensor& grad_out, const PoolParams& params, const Tensor& grad_in) {
  avg_backward(grad_out, grad_in, pool_geometry(grad_in.sizes(), grad_out.sizes(), params), /*adaptive=*/false,
               "avg_pool_backward");
}

void CpuBackend::adaptive_avg_pool_forward(const Tensor& input, const Tensor& out) {
  avg_forward(input, out, adaptive_pool_geometry(input.sizes(), out.sizes()), /*adaptive=*/true,
              "adaptive_avg_pool_forward");
}

void CpuBackend::adaptive_avg_pool_backward(const Tensor& grad_out, const Tensor& grad_in) {
  avg_backward(grad_out, grad_in, adaptive_pool_geometry(grad_in.sizes(), grad_out.sizes()), /*adaptive=*/true,
               "adaptive_avg_pool_backward");
}

}  // namespace kiln::cpu
