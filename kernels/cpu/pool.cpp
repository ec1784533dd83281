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
#include <cmath>
#include <limits>
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

template <typename T>
void max_pool_fwd(const T* x, T* y, int64_t* indices, const PoolGeometry& g) {
  using V = opmath_t<T>;
  for_each_output(g, [&](int64_t flat, const int64_t (&o)[3]) {
    int64_t start[3], first[3], last[3];
    for (int k = 0; k < 3; ++k) {
      start[k] = o[k] * g.stride[k] - g.pad[k];
      valid_taps(start[k], g.kernel[k], g.dilation[k], g.in[k], &first[k], &last[k]);
    }
    V best = -std::numeric_limits<V>::infinity();
    int64_t best_index = -1;
    for (int64_t a = first[0]; a < last[0]; ++a) {
      for (int64_t b = first[1]; b < last[1]; ++b) {
        const int64_t row = ((start[0] + a * g.dilation[0]) * g.in[1] + start[1] + b * g.dilation[1]) * g.in[2];
        for (int64_t c = first[2]; c < last[2]; ++c) {
          const int64_t i = row + start[2] + c * g.dilation[2];
          const V v = static_cast<V>(x[i]);
          if (best_index < 0 || v > best || (std::isnan(v) && !std::isnan(best))) {
            best = v;
            best_index = i;
          }
        }
      }
    }
    y[flat] = static_cast<T>(best);
    indices[flat] = best_index;
  });
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
    const int64_t window = g.kernel[0] * g.kernel[1] * g.kernel[2];
    for_each_plane(g, out_volume * window, [&](int64_t p) {
      max_pool_fwd(x + p * in_volume, y + p * out_volume, idx + p * out_volume, g);
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
