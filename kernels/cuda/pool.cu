// CudaBackend pooling: max (with argmax indices), average and adaptive average, forward
// and backward, over 1-3 spatial dims.
//
// Math (as the CPU, kernels/cpu/pool.cpp; Note [Pool geometry] in core/pool_geometry.h:
// every pooling is seen as 3-d over planes = N C volumes):
//   max:      y = max over the window, index = its flat offset in the plane's volume. A NaN
//             wins (the first in window order), ties keep the first in window order
//             (d, h, w); padding and dilation gaps are skipped. A window with no tap in
//             the input (only possible with dilation) gives -inf and index -1.
//   avg:      y = window sum / divisor (Note [Average pooling divisor]).
//   adaptive: y = window mean (Note [Adaptive windows]).
// Backward (overwrites grad_in, =), written as a gather so that it needs no atomics and is
// deterministic: each input element x sums, in a fixed order, the grad_out elements of the
// outputs whose windows can hold it (outputs_covering / adaptive_outputs_covering):
//   max:      grad_in_x = sum of grad_out_o over those o whose recorded index is x.
//   avg:      grad_in_x = sum of grad_out_o / divisor_o over those o.
// With overlapping windows (kernel > stride) an input element is in up to
// ceil(kernel / stride) windows per dim, 8 for a 3x3x3 stride-2 max pool.
//
// Layout: [N, C, s...], all operands of a call contiguous or all channels-last (Note
// [Pooling in either layout]; the op layer makes them so). Launch shape: forward
// kernels run one thread per output element, backward kernels one thread per input
// element, 256 threads a block, in grid-stride loops with 64-bit offsets (a 3-D batch
// easily exceeds 2^31 elements); consecutive threads take consecutive w (C when
// channels-last), so loads and stores along it are coalesced. Average windows of kWarpWindow elements or more
// (global pooling) get a warp per output instead: few outputs would leave the GPU idle, and a thread per
// output would walk 32 distant planes at once. Sums run in opmath (float for half/bf16/float, double for
// double) and round once on store.
#include <cuda_runtime.h>

#include <algorithm>
#include <limits>

#include "core/dispatch.h"
#include "core/pool_geometry.h"
#include "kernels/channel_layout.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_types.cuh"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/warp_shuffle.cuh"

namespace kiln::cuda {
namespace {

inline constexpr int64_t kBlocksPerSm = 32;  // enough resident blocks; the loops stride the rest
inline constexpr int64_t kWarpWindow = 64;   // average windows this large get a warp each

// ==== device helpers ===========================================================================

// Splits a flat offset over [planes, e[0], e[1], e[2]] into the plane and 3-d position.
__device__ __forceinline__ int64_t split_position(int64_t flat, const int64_t (&e)[3], int64_t (&pos)[3]) {
  pos[2] = flat % e[2];
  flat /= e[2];
  pos[1] = flat % e[1];
  flat /= e[1];
  pos[0] = flat % e[0];
  return flat / e[0];
}

// Note [Pooling in either layout]: a kernel's thread t takes the t-th element of its
// output (forward) or input (backward) in memory order, so consecutive threads write
// consecutive addresses in both layouts: along w for channels-first, along C for
// channels-last (NDHWC: element (n, c, pos) at (n volume + pos) C + c). element() turns
// t into the plane n C + c and the 3-d position; offset() finds element (plane, flat
// position) of a tensor of `volume` positions per plane.
template <bool kChannelsLast>
__device__ __forceinline__ int64_t element(int64_t t, const int64_t (&e)[3], int64_t channels,
                                           int64_t (&pos)[3]) {
  if (!kChannelsLast) return split_position(t, e, pos);
  const int64_t c = t % channels;
  return split_position(t / channels, e, pos) * channels + c;
}

template <bool kChannelsLast>
__device__ __forceinline__ int64_t offset(int64_t plane, int64_t flat, int64_t volume, int64_t channels) {
  if (!kChannelsLast) return plane * volume + flat;
  return (plane / channels * volume + flat) * channels + plane % channels;
}

// The three ranges of output o's average window (adaptive or not).
template <bool kAdaptive>
__device__ __forceinline__ void avg_ranges(const PoolGeometry& g, const int64_t (&o)[3], PoolRange (&r)[3]) {
  for (int k = 0; k < 3; ++k) r[k] = kAdaptive ? adaptive_pool_range(g, k, o[k]) : avg_pool_range(g, k, o[k]);
}

// ==== kernels ==================================================================================

template <typename T, bool kChannelsLast>
__global__ void max_pool_fwd(const T* __restrict__ x, T* __restrict__ y, int64_t* __restrict__ indices,
                             PoolGeometry g, int64_t channels, int64_t total) {
  using V = opmath_t<T>;
  const int64_t in_volume = g.in_volume();
  for (int64_t t = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; t < total; t += int64_t{gridDim.x} * blockDim.x) {
    int64_t o[3], start[3], first[3], last[3];
    const int64_t plane = element<kChannelsLast>(t, g.out, channels, o);
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
          const V v = load(x + offset<kChannelsLast>(plane, i, in_volume, channels));
          if (best_index < 0 || v > best || (v != v && best == best)) {
            best = v;
            best_index = i;
          }
        }
      }
    }
    store(y + t, best);
    indices[t] = best_index;
  }
}

// One thread per input element: the sum of grad_out over the windows whose max it was.
template <typename T, bool kChannelsLast>
__global__ void max_pool_bwd(const T* __restrict__ gy, const int64_t* __restrict__ indices,
                             T* __restrict__ gx, PoolGeometry g, int64_t channels, int64_t total) {
  using V = opmath_t<T>;
  const int64_t out_volume = g.out_volume();
  for (int64_t t = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; t < total; t += int64_t{gridDim.x} * blockDim.x) {
    int64_t x[3], first[3], last[3];
    const int64_t plane = element<kChannelsLast>(t, g.in, channels, x);
    const int64_t self = (x[0] * g.in[1] + x[1]) * g.in[2] + x[2];
    for (int k = 0; k < 3; ++k) outputs_covering(g, k, x[k], &first[k], &last[k]);
    V sum = 0;
    for (int64_t a = first[0]; a < last[0]; ++a) {
      for (int64_t b = first[1]; b < last[1]; ++b) {
        for (int64_t c = first[2]; c < last[2]; ++c) {
          const int64_t o =
              offset<kChannelsLast>(plane, (a * g.out[1] + b) * g.out[2] + c, out_volume, channels);
          if (indices[o] == self) sum += load(gy + o);
        }
      }
    }
    store(gx + t, sum);
  }
}

template <typename T, bool kAdaptive, bool kChannelsLast>
__global__ void avg_pool_fwd(const T* __restrict__ x, T* __restrict__ y, PoolGeometry g, int64_t channels,
                             int64_t total) {
  using V = opmath_t<T>;
  const int64_t in_volume = g.in_volume();
  for (int64_t t = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; t < total; t += int64_t{gridDim.x} * blockDim.x) {
    int64_t o[3];
    const int64_t plane = element<kChannelsLast>(t, g.out, channels, o);
    PoolRange r[3];
    avg_ranges<kAdaptive>(g, o, r);
    V sum = 0;
    for (int64_t d = r[0].begin; d < r[0].end; ++d) {
      for (int64_t h = r[1].begin; h < r[1].end; ++h) {
        const int64_t row = (d * g.in[1] + h) * g.in[2];
        for (int64_t w = r[2].begin; w < r[2].end; ++w) {
          sum += load(x + offset<kChannelsLast>(plane, row + w, in_volume, channels));
        }
      }
    }
    const bool empty = r[0].end <= r[0].begin || r[1].end <= r[1].begin || r[2].end <= r[2].begin;
    store(y + t, empty ? V(0) : sum / static_cast<V>(avg_pool_divisor(g, r)));
  }
}

// One warp per output, for large windows (global pooling: a thread per output would leave
// most of the GPU idle and read 32 planes at once, uncoalesced). Lanes take consecutive
// elements of the window's box, so a warp reads along w together; a shuffle sums them.
template <typename T, bool kAdaptive>
__global__ void avg_pool_fwd_warp(const T* __restrict__ x, T* __restrict__ y, PoolGeometry g, int64_t total) {
  using V = opmath_t<T>;
  const int lane = static_cast<int>(threadIdx.x % kWarpSize);
  const int64_t warps = int64_t{gridDim.x} * (blockDim.x / kWarpSize);
  const int64_t in_volume = g.in_volume();
  for (int64_t t = (blockIdx.x * int64_t{blockDim.x} + threadIdx.x) / kWarpSize; t < total; t += warps) {
    int64_t o[3];
    const int64_t plane = split_position(t, g.out, o);
    PoolRange r[3];
    avg_ranges<kAdaptive>(g, o, r);
    const int64_t eh = r[1].end - r[1].begin, ew = r[2].end - r[2].begin;
    const int64_t count = (r[0].end - r[0].begin) * eh * ew;  // 0 when any range is empty
    const T* xp = x + plane * in_volume;
    V sum = 0;
    for (int64_t e = lane; e < count; e += kWarpSize) {
      const int64_t d = r[0].begin + e / (eh * ew), h = r[1].begin + e / ew % eh, w = r[2].begin + e % ew;
      sum += load(xp + (d * g.in[1] + h) * g.in[2] + w);
    }
    sum = warp_allreduce(sum, [](V a, V b) { return a + b; });
    if (lane == 0) store(y + t, count > 0 ? sum / static_cast<V>(avg_pool_divisor(g, r)) : V(0));
  }
}

// One thread per input element: the shares of the windows that hold it.
template <typename T, bool kAdaptive, bool kChannelsLast>
__global__ void avg_pool_bwd(const T* __restrict__ gy, T* __restrict__ gx, PoolGeometry g, int64_t channels,
                             int64_t total) {
  using V = opmath_t<T>;
  const int64_t out_volume = g.out_volume();
  for (int64_t t = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; t < total; t += int64_t{gridDim.x} * blockDim.x) {
    int64_t x[3], first[3], last[3];
    const int64_t plane = element<kChannelsLast>(t, g.in, channels, x);
    for (int k = 0; k < 3; ++k) {
      if (kAdaptive) {
        adaptive_outputs_covering(g, k, x[k], &first[k], &last[k]);
      } else {
        outputs_covering(g, k, x[k], &first[k], &last[k]);
      }
    }
    V sum = 0;
    int64_t o[3];
    for (o[0] = first[0]; o[0] < last[0]; ++o[0]) {
      for (o[1] = first[1]; o[1] < last[1]; ++o[1]) {
        for (o[2] = first[2]; o[2] < last[2]; ++o[2]) {
          PoolRange r[3];
          avg_ranges<kAdaptive>(g, o, r);
          bool inside = true;
          for (int k = 0; k < 3; ++k) inside = inside && r[k].begin <= x[k] && x[k] < r[k].end;
          if (!inside) continue;
          const int64_t flat = (o[0] * g.out[1] + o[1]) * g.out[2] + o[2];
          sum += load(gy + offset<kChannelsLast>(plane, flat, out_volume, channels)) /
                 static_cast<V>(avg_pool_divisor(g, r));
        }
      }
    }
    store(gx + t, sum);
  }
}

// ==== launchers ================================================================================

// The elements of the largest window: the kernel's volume, or for adaptive pooling
// ceil(s / o) + 1 per dim (a window spans at most that many).
int64_t largest_window(const PoolGeometry& g, bool adaptive) {
  int64_t n = 1;
  for (int k = 0; k < 3; ++k) n *= adaptive ? (g.in[k] + g.out[k] - 1) / g.out[k] + 1 : g.kernel[k];
  return n;
}

// Runs fn.template operator()<T, kChannelsLast>(stream, blocks) on `t`'s device for
// `total` threads.
template <typename Fn>
void launch_on(const Tensor& t, bool channels_last, int64_t total, const char* op, const Fn& fn) {
  if (total == 0) return;
  const int device = t.device().index;
  const OnDevice on(device);
  const unsigned blocks = grid_stride_blocks(total, device, kBlocksPerSm);
  visit_dtype<kFloatingTypes>(t.dtype(), op, [&]<typename T>() {
    if (channels_last) {
      fn.template operator()<T, true>(on.stream.handle(), blocks);
    } else {
      fn.template operator()<T, false>(on.stream.handle(), blocks);
    }
  });
  KILN_CUDA_CHECK_LAUNCH();
}

template <bool kAdaptive>
void avg_forward(const Tensor& input, const Tensor& out, const PoolGeometry& g, const char* op) {
  const bool channels_last = check_pool_operands(input, out, nullptr, op);
  const int64_t total = g.planes * g.out_volume(), channels = input.sizes()[1];
  // Channels-last: a thread per output already reads along C, coalesced (Note [Pooling in
  // either layout]); the warp per output is for channels-first's distant planes.
  if (!channels_last && largest_window(g, kAdaptive) >= kWarpWindow) {  // 32 threads for each output
    launch_on(input, false, total * kWarpSize, op,
              [&]<typename T, bool>(cudaStream_t stream, unsigned blocks) {
                avg_pool_fwd_warp<T, kAdaptive><<<blocks, kBlockThreads, 0, stream>>>(
                    static_cast<const T*>(input.data_ptr()), static_cast<T*>(out.data_ptr()), g, total);
              });
    return;
  }
  launch_on(input, channels_last, total, op,
            [&]<typename T, bool kChannelsLast>(cudaStream_t stream, unsigned blocks) {
              avg_pool_fwd<T, kAdaptive, kChannelsLast>
                  <<<blocks, kBlockThreads, 0, stream>>>(static_cast<const T*>(input.data_ptr()),
                                                         static_cast<T*>(out.data_ptr()), g, channels, total);
            });
}

template <bool kAdaptive>
void avg_backward(const Tensor& grad_out, const Tensor& grad_in, const PoolGeometry& g, const char* op) {
  const bool channels_last = check_pool_operands(grad_in, grad_out, nullptr, op);
  const int64_t total = g.planes * g.in_volume(), channels = grad_in.sizes()[1];
  launch_on(grad_in, channels_last, total, op,
            [&]<typename T, bool kChannelsLast>(cudaStream_t stream, unsigned blocks) {
              avg_pool_bwd<T, kAdaptive, kChannelsLast><<<blocks, kBlockThreads, 0, stream>>>(
                  static_cast<const T*>(grad_out.data_ptr()), static_cast<T*>(grad_in.data_ptr()), g,
                  channels, total);
            });
}

}  // namespace

void CudaBackend::max_pool_forward(const Tensor& input, const PoolParams& params, const Tensor& out,
                                   const Tensor& indices) {
  const bool channels_last = check_pool_operands(input, out, &indices, "max_pool_forward");
  const PoolGeometry g = pool_geometry(input.sizes(), out.sizes(), params);
  const int64_t total = g.planes * g.out_volume(), channels = input.sizes()[1];
  launch_on(input, channels_last, total, "max_pool_forward",
            [&]<typename T, bool kChannelsLast>(cudaStream_t stream, unsigned blocks) {
              max_pool_fwd<T, kChannelsLast><<<blocks, kBlockThreads, 0, stream>>>(
                  static_cast<const T*>(input.data_ptr()), static_cast<T*>(out.data_ptr()),
                  static_cast<int64_t*>(indices.data_ptr()), g, channels, total);
            });
}

void CudaBackend::max_pool_backward(const Tensor& grad_out, const Tensor& indices, const PoolParams& params,
                                    const Tensor& grad_in) {
  const bool channels_last = check_pool_operands(grad_in, grad_out, &indices, "max_pool_backward");
  const PoolGeometry g = pool_geometry(grad_in.sizes(), grad_out.sizes(), params);
  const int64_t total = g.planes * g.in_volume(), channels = grad_in.sizes()[1];
  launch_on(grad_in, channels_last, total, "max_pool_backward",
            [&]<typename T, bool kChannelsLast>(cudaStream_t stream, unsigned blocks) {
              max_pool_bwd<T, kChannelsLast><<<blocks, kBlockThreads, 0, stream>>>(
                  static_cast<const T*>(grad_out.data_ptr()), static_cast<const int64_t*>(indices.data_ptr()),
                  static_cast<T*>(grad_in.data_ptr()), g, channels, total);
            });
}

void CudaBackend::avg_pool_forward(const Tensor& input, const PoolParams& params, const Tensor& out) {
  avg_forward<false>(input, out, pool_geometry(input.sizes(), out.sizes(), params), "avg_pool_forward");
}

void CudaBackend::avg_pool_backward(const Tensor& grad_out, const PoolParams& params, const Tensor& grad_in) {
  avg_backward<false>(grad_out, grad_in, pool_geometry(grad_in.sizes(), grad_out.sizes(), params),
                      "avg_pool_backward");
}

void CudaBackend::adaptive_avg_pool_forward(const Tensor& input, const Tensor& out) {
  avg_forward<true>(input, out, adaptive_pool_geometry(input.sizes(), out.sizes()), "adaptive_avg_pool_forward");
}

void CudaBackend::adaptive_avg_pool_backward(const Tensor& grad_out, const Tensor& grad_in) {
  avg_backward<true>(grad_out, grad_in, adaptive_pool_geometry(grad_in.sizes(), grad_out.sizes()),
                     "adaptive_avg_pool_backward");
}

}  // namespace kiln::cuda
