// CpuBackend pooling for channels-last operands (NDHWC / NHWC): max (with indices),
// average and adaptive average, forward and backward, with the math and the index
// convention of pool.cpp (Note [Pool geometry] in core/pool_geometry.h: the index is the
// flat spatial position, whatever the layout).
//
// Channels are innermost, so a window is a handful of taps, each a run of C contiguous
// values, and every kernel loops over an output (or input) position with the C channels
// innermost: contiguous loads and stores beside per-channel accumulators.
//   max forward:  per output position, the taps in window order (d, h, w), each offered to
//                 the C running maxima (takes_place's rule, pool_windows.h: NaN wins, ties keep
//                 the first), kept as a values and an indices array so the update vectorises.
//   max backward: per (sample, block of channels), a zeroed accumulator of the block's
//                 input values; the outputs scatter into it in output order, as pool.cpp.
//   avg forward:  per output position, the C sums over the window, divided once.
//   avg backward: per input position, the shares of the windows that hold it (a gather,
//                 AvgAxis's covering outputs), so threads never write the same value.
// Positions are split over OpenMP threads; every result is deterministic. Half types
// accumulate in float (Note [Opmath]) and round once on store.
#include "kernels/cpu/pool_channels_last.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "core/dispatch.h"
#include "kernels/cpu/elementwise_engine.h"  // parallel_for, kGrain
#include "kernels/cpu/pool_windows.h"

namespace kiln::cpu::pool_channels_last {
namespace {

inline constexpr int64_t kChannelBlock = 64;  // channels of one max-backward accumulator

// [N, volume, C] positions of a channels-last operand.
struct Positions {
  int64_t batch = 1, channels = 1;
};

Positions positions_of(const PoolGeometry& g, const Tensor& t) {
  const int64_t channels = t.sizes()[1];
  return {channels == 0 ? 0 : g.planes / channels, channels};
}

// (d, h, w) of the flat position `flat` among extents e.
void split(int64_t flat, const int64_t (&e)[3], int64_t (&pos)[3]) {
  pos[2] = flat % e[2];
  pos[1] = flat / e[2] % e[1];
  pos[0] = flat / (e[1] * e[2]);
}

int64_t grain_for(int64_t work_per_position) {
  return std::max<int64_t>(1, kGrain / std::max<int64_t>(1, work_per_position));
}

}  // namespace

void max_forward(const Tensor& input, const PoolGeometry& g, const Tensor& out, const Tensor& indices) {
  const Positions p = positions_of(g, input);
  const int64_t in_volume = g.in_volume(), out_volume = g.out_volume(), channels = p.channels;
  const AxisTaps taps[3] = {AxisTaps(g, 0), AxisTaps(g, 1), AxisTaps(g, 2)};
  visit_dtype<kFloatingTypes>(input.dtype(), "max_pool_forward", [&]<typename T>() {
    using V = opmath_t<T>;
    const T* x = static_cast<const T*>(input.data_ptr());
    T* y = static_cast<T*>(out.data_ptr());
    int64_t* idx = static_cast<int64_t*>(indices.data_ptr());
    const int64_t work = channels * g.kernel[0] * g.kernel[1] * g.kernel[2];
    parallel_for(p.batch * out_volume, grain_for(work), [&](int64_t begin, int64_t end) {
      // The C running maxima as two arrays, so the per-tap update over C vectorises
      // (an array of (value, index) pairs measured 1.5x slower than NCDHW).
      std::vector<V> best(static_cast<size_t>(channels));
      std::vector<int64_t> where(static_cast<size_t>(channels));
      for (int64_t u = begin; u < end; ++u) {
        const int64_t n = u / out_volume;
        int64_t o[3];
        split(u % out_volume, g.out, o);
        std::fill(best.begin(), best.end(), -std::numeric_limits<V>::infinity());
        std::fill(where.begin(), where.end(), int64_t{-1});  // -1: no tap yet
        for (int64_t a = taps[0].first[o[0]]; a < taps[0].last[o[0]]; ++a) {
          const int64_t d = taps[0].at(o[0], a);
          for (int64_t b = taps[1].first[o[1]]; b < taps[1].last[o[1]]; ++b) {
            const int64_t h = taps[1].at(o[1], b);
            for (int64_t k = taps[2].first[o[2]]; k < taps[2].last[o[2]]; ++k) {
              const int64_t pos = (d * g.in[1] + h) * g.in[2] + taps[2].at(o[2], k);
              const T* row = x + (n * in_volume + pos) * channels;
              for (int64_t c = 0; c < channels; ++c) {
                const V v = static_cast<V>(row[c]), b = best[c];
                const int64_t w = where[c];
                // pool_windows.h's rule; pos is always a tap, so say so as a constant
                // (a compare fewer per value).
                const bool take = takes_place(v, /*index=*/int64_t{0}, b, w);
                best[c] = take ? v : b;
                where[c] = take ? pos : w;
              }
            }
          }
        }
        for (int64_t c = 0; c < channels; ++c) {
          y[u * channels + c] = static_cast<T>(best[c]);
          idx[u * channels + c] = where[c];
        }
      }
    });
  });
}

void max_backward(const Tensor& grad_out, const Tensor& indices, const PoolGeometry& g,
                  const Tensor& grad_in) {
  const Positions p = positions_of(g, grad_in);
  const int64_t in_volume = g.in_volume(), out_volume = g.out_volume(), channels = p.channels;
  const int64_t blocks = (channels + kChannelBlock - 1) / kChannelBlock;
  visit_dtype<kFloatingTypes>(grad_in.dtype(), "max_pool_backward", [&]<typename T>() {
    using V = opmath_t<T>;
    const T* gy = static_cast<const T*>(grad_out.data_ptr());
    const int64_t* idx = static_cast<const int64_t*>(indices.data_ptr());
    T* gx = static_cast<T*>(grad_in.data_ptr());
    const int64_t work = std::min(channels, kChannelBlock) * (in_volume + out_volume);
    parallel_for(p.batch * blocks, grain_for(work), [&](int64_t begin, int64_t end) {
      std::vector<V> acc;
      for (int64_t task = begin; task < end; ++task) {
        const int64_t n = task / blocks, c0 = task % blocks * kChannelBlock;
        const int64_t width = std::min(kChannelBlock, channels - c0);
        acc.assign(static_cast<size_t>(in_volume * width), V(0));
        for (int64_t o = 0; o < out_volume; ++o) {
          const int64_t at = (n * out_volume + o) * channels + c0;
          for (int64_t c = 0; c < width; ++c) {
            const int64_t i = idx[at + c];
            if (i >= 0) acc[i * width + c] += static_cast<V>(gy[at + c]);
          }
        }
        for (int64_t i = 0; i < in_volume; ++i) {
          T* row = gx + (n * in_volume + i) * channels + c0;
          for (int64_t c = 0; c < width; ++c) row[c] = static_cast<T>(acc[i * width + c]);
        }
      }
    });
  });
}

void avg_forward(const Tensor& input, const Tensor& out, const PoolGeometry& g, bool adaptive) {
  const Positions p = positions_of(g, input);
  const int64_t in_volume = g.in_volume(), out_volume = g.out_volume(), channels = p.channels;
  const AvgAxis axes[3] = {AvgAxis(g, 0, adaptive), AvgAxis(g, 1, adaptive), AvgAxis(g, 2, adaptive)};
  visit_dtype<kFloatingTypes>(input.dtype(), "avg_pool_forward", [&]<typename T>() {
    using V = opmath_t<T>;
    const T* x = static_cast<const T*>(input.data_ptr());
    T* y = static_cast<T*>(out.data_ptr());
    const int64_t window = std::max<int64_t>(1, in_volume / std::max<int64_t>(1, out_volume));
    parallel_for(p.batch * out_volume, grain_for(channels * window), [&](int64_t begin, int64_t end) {
      std::vector<V> sum(static_cast<size_t>(channels));
      for (int64_t u = begin; u < end; ++u) {
        const int64_t n = u / out_volume;
        int64_t o[3];
        split(u % out_volume, g.out, o);
        std::fill(sum.begin(), sum.end(), V(0));
        const PoolRange &rd = axes[0].window[o[0]], &rh = axes[1].window[o[1]], &rw = axes[2].window[o[2]];
        for (int64_t d = rd.begin; d < rd.end; ++d) {
          for (int64_t h = rh.begin; h < rh.end; ++h) {
            for (int64_t w = rw.begin; w < rw.end; ++w) {
              const T* row = x + (n * in_volume + (d * g.in[1] + h) * g.in[2] + w) * channels;
              for (int64_t c = 0; c < channels; ++c) sum[c] += static_cast<V>(row[c]);
            }
          }
        }
        const int64_t divisor = avg_divisor(g, axes, o[0], o[1], o[2]);
        T* out_row = y + u * channels;
        for (int64_t c = 0; c < channels; ++c) {
          out_row[c] = static_cast<T>(divisor == 0 ? V(0) : sum[c] / static_cast<V>(divisor));
        }
      }
    });
  });
}

void avg_backward(const Tensor& grad_out, const Tensor& grad_in, const PoolGeometry& g, bool adaptive) {
  const Positions p = positions_of(g, grad_in);
  const int64_t in_volume = g.in_volume(), out_volume = g.out_volume(), channels = p.channels;
  const AvgAxis axes[3] = {AvgAxis(g, 0, adaptive), AvgAxis(g, 1, adaptive), AvgAxis(g, 2, adaptive)};
  visit_dtype<kFloatingTypes>(grad_in.dtype(), "avg_pool_backward", [&]<typename T>() {
    using V = opmath_t<T>;
    const T* gy = static_cast<const T*>(grad_out.data_ptr());
    T* gx = static_cast<T*>(grad_in.data_ptr());
    const int64_t covering = std::max<int64_t>(1, out_volume / std::max<int64_t>(1, in_volume));
    parallel_for(p.batch * in_volume, grain_for(channels * covering), [&](int64_t begin, int64_t end) {
      std::vector<V> sum(static_cast<size_t>(channels));
      for (int64_t u = begin; u < end; ++u) {
        const int64_t n = u / in_volume;
        int64_t i[3];
        split(u % in_volume, g.in, i);
        std::fill(sum.begin(), sum.end(), V(0));
        for (int64_t od = axes[0].first[i[0]]; od < axes[0].last[i[0]]; ++od) {
          for (int64_t oh = axes[1].first[i[1]]; oh < axes[1].last[i[1]]; ++oh) {
            for (int64_t ow = axes[2].first[i[2]]; ow < axes[2].last[i[2]]; ++ow) {
              const V divisor = static_cast<V>(avg_divisor(g, axes, od, oh, ow));  // > 0: the window holds i
              const T* row = gy + (n * out_volume + (od * g.out[1] + oh) * g.out[2] + ow) * channels;
              for (int64_t c = 0; c < channels; ++c) sum[c] += static_cast<V>(row[c]) / divisor;
            }
          }
        }
        T* in_row = gx + u * channels;
        for (int64_t c = 0; c < channels; ++c) in_row[c] = static_cast<T>(sum[c]);
      }
    });
  });
}

}  // namespace kiln::cpu::pool_channels_last
