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
// Each backward scatters one plane serially into a zeroed accumulator, in output order,
// so results are deterministic.
//
// Layout: input, output, indices and gradients contiguous [N, C, s...] (the op layer
// makes them so). Planes are split over OpenMP threads (about kGrain elements of work a
// chunk). Float16/BFloat16 compute in float32 and round once on store (Note [Opmath]).
#include <algorithm>
#include <bit>
#include <cstdint>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "core/dispatch.h"
#include "core/pool_geometry.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/elementwise_engine.h"  // parallel_for, kGrain

namespace kiln::cpu {
namespace {

// Runs fn(plane) for every plane, split over threads by the work per plane.
template <typename Fn>
void for_each_plane(const PoolGeometry& g, int64_t work_per_plane, const Fn& fn) {
  const int64_t grain = std::max<int64_t>(1, kGrain / std::max<int64_t>(1, work_per_plane));
  parallel_for(g.planes, grain, [&](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end; ++p) fn(p);
  });
}

// Calls fn(flat output offset, o[3]) for every output position of a plane, in order.
template <typename Fn>
void for_each_output(const PoolGeometry& g, const Fn& fn) {
  int64_t flat = 0;
  int64_t o[3];
  for (o[0] = 0; o[0] < g.out[0]; ++o[0]) {
    for (o[1] = 0; o[1] < g.out[1]; ++o[1]) {
      for (o[2] = 0; o[2] < g.out[2]; ++o[2]) fn(flat++, o);
    }
  }
}

// Calls fn(flat input offset) for every element of the box r[0] x r[1] x r[2].
template <typename Fn>
void for_each_in_box(const PoolGeometry& g, const PoolRange (&r)[3], const Fn& fn) {
  for (int64_t d = r[0].begin; d < r[0].end; ++d) {
    for (int64_t h = r[1].begin; h < r[1].end; ++h) {
      const int64_t row = (d * g.in[1] + h) * g.in[2];
      for (int64_t w = r[2].begin; w < r[2].end; ++w) fn(row + w);
    }
  }
}

// The three ranges of output o's average window (adaptive or not).
void avg_ranges(const PoolGeometry& g, bool adaptive, const int64_t (&o)[3], PoolRange (&r)[3]) {
  for (int k = 0; k < 3; ++k) r[k] = adaptive ? adaptive_pool_range(g, k, o[k]) : avg_pool_range(g, k, o[k]);
}

// ---- kernels: one plane each ----------------------------------------------------------------

// Note [Separable max pooling]: a max over a box is a max along w, then along h, then
// along d, and so is its argmax: window order is lexicographic in (d, h, w), so keeping the
// first winner at each stage keeps the first winner of the box, and a NaN, once a stage
// picks it, wins every later stage (the first NaN in window order). A 3x3x3 window then
// costs 3 + 3 + 3 comparisons per output instead of 27, each input read about 3 times
// instead of 27 / (stride^3). The stages go through two per-thread buffers of candidates
// (value, flat input index): along w for every input row, then along h.
template <typename V>
struct MaxCandidate {
  V value;
  int64_t index;  // -1: no tap (a window entirely in padding or dilation gaps)
};

// Branch-free (selects, not jumps): on real data whether a tap beats the best so far is a
// coin toss, and a mispredicted branch per tap cost more than the whole comparison.
template <typename V>
void offer(MaxCandidate<V>& best, V value, int64_t index) {
  const bool take = (index >= 0) & ((best.index < 0) | (value > best.value) |
                                    ((value != value) & (best.value == best.value)));
  const int64_t mask = -static_cast<int64_t>(take);  // all ones when taken
  best.index = (index & mask) | (best.index & ~mask);
  using Bits = std::conditional_t<sizeof(V) == 4, uint32_t, uint64_t>;
  const Bits value_mask = static_cast<Bits>(mask);
  best.value = std::bit_cast<V>(static_cast<Bits>((std::bit_cast<Bits>(value) & value_mask) |
                                                  (std::bit_cast<Bits>(best.value) & ~value_mask)));
}

// The taps of every output position along dim k: start and [first, last) (valid_taps).
struct AxisTaps {
  std::vector<int64_t> start, first, last;
  int64_t dilation;
  AxisTaps(const PoolGeometry& g, int k) : dilation(g.dilation[k]) {
    for (int64_t o = 0; o < g.out[k]; ++o) {
      int64_t f = 0, l = 0;
      valid_taps(o * g.stride[k] - g.pad[k], g.kernel[k], g.dilation[k], g.in[k], &f, &l);
      start.push_back(o * g.stride[k] - g.pad[k]);
      first.push_back(f);
      last.push_back(l);
    }
  }
  // Input position of output o's tap t.
  int64_t at(int64_t o, int64_t t) const { return start[o] + t * dilation; }
};

template <typename T>
void max_pool_fwd(const T* x, T* y, int64_t* indices, const PoolGeometry& g, const AxisTaps (&taps)[3],
                  std::vector<MaxCandidate<opmath_t<T>>>& along_w, std::vector<MaxCandidate<opmath_t<T>>>& along_h) {
  using V = opmath_t<T>;
  const MaxCandidate<V> none{-std::numeric_limits<V>::infinity(), -1};
  const int64_t in_d = g.in[0], in_h = g.in[1], in_w = g.in[2];
  const int64_t out_d = g.out[0], out_h = g.out[1], out_w = g.out[2];
  along_w.resize(static_cast<size_t>(in_d * in_h * out_w));
  along_h.resize(static_cast<size_t>(in_d * out_h * out_w));
  for (int64_t row = 0; row < in_d * in_h; ++row) {  // every input row (d, h): along w
    for (int64_t ow = 0; ow < out_w; ++ow) {
      MaxCandidate<V> best = none;
      for (int64_t t = taps[2].first[ow]; t < taps[2].last[ow]; ++t) {
        const int64_t i = row * in_w + taps[2].at(ow, t);
        offer(best, static_cast<V>(x[i]), i);
      }
      along_w[row * out_w + ow] = best;
    }
  }
  for (int64_t d = 0; d < in_d; ++d) {  // along h
    for (int64_t oh = 0; oh < out_h; ++oh) {
      for (int64_t ow = 0; ow < out_w; ++ow) {
        MaxCandidate<V> best = none;
        for (int64_t t = taps[1].first[oh]; t < taps[1].last[oh]; ++t) {
          const MaxCandidate<V>& c = along_w[(d * in_h + taps[1].at(oh, t)) * out_w + ow];
          offer(best, c.value, c.index);
        }
        along_h[(d * out_h + oh) * out_w + ow] = best;
      }
    }
  }
  for (int64_t od = 0; od < out_d; ++od) {  // along d, into the output
    for (int64_t oh = 0; oh < out_h; ++oh) {
      for (int64_t ow = 0; ow < out_w; ++ow) {
        MaxCandidate<V> best = none;
        for (int64_t t = taps[0].first[od]; t < taps[0].last[od]; ++t) {
          const MaxCandidate<V>& c = along_h[(taps[0].at(od, t) * out_h + oh) * out_w + ow];
          offer(best, c.value, c.index);
        }
        const int64_t flat = (od * out_h + oh) * out_w + ow;
        y[flat] = static_cast<T>(best.value);
        indices[flat] = best.index;
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

template <typename T>
void avg_pool_fwd(const T* x, T* y, const PoolGeometry& g, bool adaptive) {
  using V = opmath_t<T>;
  for_each_output(g, [&](int64_t flat, const int64_t (&o)[3]) {
    PoolRange r[3];
    avg_ranges(g, adaptive, o, r);
    V sum = 0;
    for_each_in_box(g, r, [&](int64_t i) { sum += static_cast<V>(x[i]); });
    const bool empty = r[0].end <= r[0].begin || r[1].end <= r[1].begin || r[2].end <= r[2].begin;
    y[flat] = static_cast<T>(empty ? V(0) : sum / static_cast<V>(avg_pool_divisor(g, r)));
  });
}

template <typename T>
void avg_pool_bwd(const T* gy, T* gx, std::vector<opmath_t<T>>& acc, const PoolGeometry& g, bool adaptive) {
  using V = opmath_t<T>;
  std::fill(acc.begin(), acc.end(), V(0));
  for_each_output(g, [&](int64_t flat, const int64_t (&o)[3]) {
    PoolRange r[3];
    avg_ranges(g, adaptive, o, r);
    const V share = static_cast<V>(gy[flat]) / static_cast<V>(avg_pool_divisor(g, r));
    for_each_in_box(g, r, [&](int64_t i) { acc[i] += share; });
  });
  for (size_t i = 0; i < acc.size(); ++i) gx[i] = static_cast<T>(acc[i]);
}

// ---- shared launch code -----------------------------------------------------------------------

void check_geometry(const Tensor& in, const Tensor& out, const char* op) {
  KILN_ASSERT(in.is_contiguous() && out.is_contiguous() && in.dtype() == out.dtype() && in.dim() == out.dim() &&
                  in.dim() >= 3 && in.dim() <= 5,
              op, ": expected contiguous [N, C, s...] tensors of one dtype, got ", in.sizes(), " ", in.dtype(),
              " and ", out.sizes(), " ", out.dtype());
}

void avg_forward(const Tensor& input, const Tensor& out, const PoolGeometry& g, bool adaptive, const char* op) {
  check_geometry(input, out, op);
  visit_dtype<kFloatingTypes>(input.dtype(), op, [&]<typename T>() {
    const T* x = static_cast<const T*>(input.data_ptr());
    T* y = static_cast<T*>(out.data_ptr());
    const int64_t in_volume = g.in_volume(), out_volume = g.out_volume();
    for_each_plane(g, in_volume + out_volume, [&](int64_t p) {
      avg_pool_fwd(x + p * in_volume, y + p * out_volume, g, adaptive);
    });
  });
}

void avg_backward(const Tensor& grad_out, const Tensor& grad_in, const PoolGeometry& g, bool adaptive,
                  const char* op) {
  check_geometry(grad_in, grad_out, op);
  visit_dtype<kFloatingTypes>(grad_in.dtype(), op, [&]<typename T>() {
    const T* gy = static_cast<const T*>(grad_out.data_ptr());
    T* gx = static_cast<T*>(grad_in.data_ptr());
    const int64_t in_volume = g.in_volume(), out_volume = g.out_volume();
    const int64_t grain = std::max<int64_t>(1, kGrain / (in_volume + out_volume));
    parallel_for(g.planes, grain, [&](int64_t begin, int64_t end) {
      std::vector<opmath_t<T>> acc(static_cast<size_t>(in_volume));
      for (int64_t p = begin; p < end; ++p) avg_pool_bwd(gy + p * out_volume, gx + p * in_volume, acc, g, adaptive);
    });
  });
}

}  // namespace

// ---- launchers --------------------------------------------------------------------------------

void CpuBackend::max_pool_forward(const Tensor& input, const PoolParams& params, const Tensor& out,
                                  const Tensor& indices) {
  check_geometry(input, out, "max_pool_forward");
  KILN_ASSERT(indices.dtype() == DType::Int64 && indices.is_contiguous() && indices.sizes() == out.sizes(),
              "max_pool_forward: indices ", indices.sizes(), " ", indices.dtype());
  const PoolGeometry g = pool_geometry(input.sizes(), out.sizes(), params);
  visit_dtype<kFloatingTypes>(input.dtype(), "max_pool_forward", [&]<typename T>() {
    const T* x = static_cast<const T*>(input.data_ptr());
    T* y = static_cast<T*>(out.data_ptr());
    int64_t* idx = static_cast<int64_t*>(indices.data_ptr());
    const int64_t in_volume = g.in_volume(), out_volume = g.out_volume();
    const AxisTaps taps[3] = {AxisTaps(g, 0), AxisTaps(g, 1), AxisTaps(g, 2)};
    const int64_t work = in_volume + out_volume * (g.kernel[0] + g.kernel[1] + g.kernel[2]);
    parallel_for(g.planes, std::max<int64_t>(1, kGrain / std::max<int64_t>(1, work)), [&](int64_t begin, int64_t end) {
      std::vector<MaxCandidate<opmath_t<T>>> along_w, along_h;
      for (int64_t p = begin; p < end; ++p) {
        max_pool_fwd(x + p * in_volume, y + p * out_volume, idx + p * out_volume, g, taps, along_w, along_h);
      }
    });
  });
}

void CpuBackend::max_pool_backward(const Tensor& grad_out, const Tensor& indices, const PoolParams& params,
                                   const Tensor& grad_in) {
  check_geometry(grad_in, grad_out, "max_pool_backward");
  KILN_ASSERT(indices.dtype() == DType::Int64 && indices.is_contiguous() && indices.sizes() == grad_out.sizes(),
              "max_pool_backward: indices ", indices.sizes(), " ", indices.dtype());
  const PoolGeometry g = pool_geometry(grad_in.sizes(), grad_out.sizes(), params);
  visit_dtype<kFloatingTypes>(grad_in.dtype(), "max_pool_backward", [&]<typename T>() {
    const T* gy = static_cast<const T*>(grad_out.data_ptr());
    const int64_t* idx = static_cast<const int64_t*>(indices.data_ptr());
    T* gx = static_cast<T*>(grad_in.data_ptr());
    const int64_t in_volume = g.in_volume(), out_volume = g.out_volume();
    const int64_t grain = std::max<int64_t>(1, kGrain / (in_volume + out_volume));
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
