// CudaBackend softmax and log-softmax along one dim, forward and backward, fused.
//
// Math, for one row x of length n along `dim` (as the CPU, kernels/cpu/softmax.cpp):
//   m = max_j x_j,  s = sum_j exp(x_j - m)
//   softmax:      y_j = exp(x_j - m) * (1 / s)
//   log_softmax:  y_j = (x_j - m) - log s
// Backward, from the saved output y and the incoming gradient g (overwrites grad_in):
//   softmax:      grad_in_j = y_j (g_j - sum_k g_k y_k)
//   log_softmax:  grad_in_j = g_j - exp(y_j) sum_k g_k
// A row whose max is -inf (all -inf) or +inf, or that holds a NaN, gives NaN, as the CPU:
// the max is NaN-sticky, and exp(-inf - -inf) = exp(inf - inf) = NaN do the rest.
//
// Note [Online softmax]: m and s can be found in one read of the row. Keep a running max
// m and a sum s of exp(x - m); when a larger value arrives, rescale the sum to the new
// max first: s = s * exp(m_old - m_new) + exp(x - m_new). Partial (m, s) states of
// different threads merge the same way. Until a finite value arrives (m = -inf) s stays
// 0, so a leading -inf does not poison the sum with exp(-inf - -inf) = NaN; a row that
// is -inf throughout gives m = -inf, and the write pass turns it into NaN as the CPU.
//
// Launch shapes, by layout (sums in opmath: float for float/half/bf16, double for double):
//   dim innermost with stride 1, n <= 1024 (logits [N, classes]): one warp per row; the
//     row lives in registers (up to 32 values a lane), so it is read once: a warp max,
//     a warp sum, then the write. Lane l holds elements l, l + 32, ...: coalesced.
//   dim innermost with stride 1, n > 1024: one block per row; pass 1 reads the row and
//     keeps (m, s) online, pass 2 reads it again and writes: 2 reads + 1 write, not 3 + 1.
//     16-byte vector loads when every row starts aligned.
//   otherwise (softmax over the channels of NCDHW, or any strides): one thread per row,
//     neighbouring threads on neighbouring rows (the innermost other dim, stride 1 in a
//     contiguous tensor), so each step along dim is a coalesced load across the warp.
// Every element is read by the thread that later writes it, after all its reads, so
// `out` may alias `in` (and grad_in may alias grad_out).
#include <cmath>
#include <limits>
#include <type_traits>

#include "core/dispatch.h"
#include "kernels/cuda/aligned_vector.cuh"
#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/reduce.cuh"  // offsets_at, offset_calculator_of, ReduceDim
#include "kernels/cuda/warp_shuffle.cuh"

namespace kiln::cuda {
namespace {

inline constexpr int kWarpRowMax = 1024;  // rows up to this long live in a warp's registers
inline constexpr int kWarpRowsPerBlock = 4;

// ==== device math =============================================================================

template <typename V>
__device__ __forceinline__ V exp_of(V x) {
  if constexpr (std::is_same_v<V, float>) return expf(x); else return ::exp(x);
}
template <typename V>
__device__ __forceinline__ V log_of(V x) {
  if constexpr (std::is_same_v<V, float>) return logf(x); else return ::log(x);
}
// max that keeps a NaN from either side.
template <typename V>
__device__ __forceinline__ V nan_max(V a, V b) {
  return (a != a || a > b) ? a : b;
}
template <typename V>
__device__ __forceinline__ V minus_inf() {
  return -std::numeric_limits<V>::infinity();
}

// Note [Online softmax]: the running max and the sum of exp(x - max).
template <typename V>
struct OnlineState {
  V max;
  V sum;
};

template <typename V>
__device__ __forceinline__ OnlineState<V> empty_state() {
  return {minus_inf<V>(), V(0)};
}

// Moves the state to a new max `m` (>= its own, or NaN); s stays 0 while m is -inf.
template <typename V>
__device__ __forceinline__ OnlineState<V> rescale(OnlineState<V> s, V m) {
  if (m == minus_inf<V>()) return {m, V(0)};
  if (m != s.max) s.sum = s.sum * exp_of(s.max - m);
  s.max = m;
  return s;
}

template <typename V>
__device__ __forceinline__ OnlineState<V> add_value(OnlineState<V> s, V x) {
  s = rescale(s, nan_max(s.max, x));
  if (s.max != minus_inf<V>()) s.sum += exp_of(x - s.max);
  return s;
}

template <typename V>
__device__ __forceinline__ OnlineState<V> merge(OnlineState<V> a, OnlineState<V> b) {
  const V m = nan_max(a.max, b.max);
  a = rescale(a, m);
  b = rescale(b, m);
  return {m, a.sum + b.sum};
}

template <typename V>
__device__ __forceinline__ V softmax_value(V x, V m, V scale, bool log) {
  return log ? (x - m) - scale : exp_of(x - m) * scale;
}

template <typename V>
__device__ __forceinline__ V softmax_grad(V g, V y, V total, bool log) {
  return log ? g - exp_of(y) * total : y * (g - total);
}

// ==== kernels: forward ========================================================================

// One warp per row of n <= 32 * kItems contiguous elements, held in registers.
template <typename T, int kItems>
__global__ void softmax_warp_fwd(const T* x, T* y, OffsetCalculator<3> rows, int64_t num_rows, int n, bool log) {
  using V = opmath_t<T>;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y;
  if (row >= num_rows) return;  // the whole warp shares the row
  const auto offsets = offsets_at(rows, row);
  const int lane = threadIdx.x;
  V values[kItems];
  V m = minus_inf<V>();
#pragma unroll
  for (int i = 0; i < kItems; ++i) {
    const int j = lane + 32 * i;
    values[i] = j < n ? load(x + offsets[0] + j) : minus_inf<V>();
    if (j < n) m = nan_max(m, values[i]);
  }
  m = warp_allreduce(m, [](V a, V b) { return nan_max(a, b); });
  V s = 0;
#pragma unroll
  for (int i = 0; i < kItems; ++i) {
    if (lane + 32 * i < n) s += exp_of(values[i] - m);
  }
  s = warp_allreduce(s, [](V a, V b) { return a + b; });
  const V scale = log ? log_of(s) : V(1) / s;
#pragma unroll
  for (int i = 0; i < kItems; ++i) {
    const int j = lane + 32 * i;
    if (j < n) store(y + offsets[1] + j, softmax_value(values[i], m, scale, log));
  }
}

// One block per row of contiguous elements: an online pass (Note [Online softmax]), then
// the write pass. kVec > 1: every row starts 16-byte aligned in x and y.
template <typename T, int kVec>
__global__ void softmax_block_fwd(const T* x, T* y, OffsetCalculator<3> rows, int64_t n, bool log) {
  using V = opmath_t<T>;
  const auto offsets = offsets_at(rows, blockIdx.x);
  const T* xr = x + offsets[0];
  T* yr = y + offsets[1];
  const int64_t vectors = n / kVec;
  OnlineState<V> state = empty_state<V>();
  for (int64_t v = threadIdx.x; v < vectors; v += blockDim.x) {
    const AlignedVector<T, kVec> p = reinterpret_cast<const AlignedVector<T, kVec>*>(xr)[v];
    V m = state.max;
#pragma unroll
    for (int k = 0; k < kVec; ++k) m = nan_max(m, to_opmath(p.values[k]));
    state = rescale(state, m);  // once per vector, not per element
    if (m != minus_inf<V>()) {
#pragma unroll
      for (int k = 0; k < kVec; ++k) state.sum += exp_of(to_opmath(p.values[k]) - m);
    }
  }
  for (int64_t j = vectors * kVec + threadIdx.x; j < n; j += blockDim.x) state = add_value(state, load(xr + j));
  state = block_allreduce(state, [](OnlineState<V> a, OnlineState<V> b) { return merge(a, b); });
  const V m = state.max;
  const V scale = log ? log_of(state.sum) : V(1) / state.sum;
  for (int64_t v = threadIdx.x; v < vectors; v += blockDim.x) {
    const AlignedVector<T, kVec> p = reinterpret_cast<const AlignedVector<T, kVec>*>(xr)[v];
    AlignedVector<T, kVec> out;
#pragma unroll
    for (int k = 0; k < kVec; ++k) out.values[k] = from_opmath<T>(softmax_value(to_opmath(p.values[k]), m, scale, log));
    reinterpret_cast<AlignedVector<T, kVec>*>(yr)[v] = out;
  }
  for (int64_t j = vectors * kVec + threadIdx.x; j < n; j += blockDim.x) {
    store(yr + j, softmax_value(load(xr + j), m, scale, log));
  }
}

// One thread per row, any strides (step = the stride of dim in x and y).
template <typename T>
__global__ void softmax_strided_fwd(const T* x, T* y, OffsetCalculator<3> rows, int64_t num_rows, int64_t n,
                                    int64_t x_step, int64_t y_step, bool log) {
  using V = opmath_t<T>;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (row >= num_rows) return;
  const auto offsets = offsets_at(rows, row);
  OnlineState<V> state = empty_state<V>();
  for (int64_t j = 0; j < n; ++j) state = add_value(state, load(x + offsets[0] + j * x_step));
  const V scale = log ? log_of(state.sum) : V(1) / state.sum;
  for (int64_t j = 0; j < n; ++j) {
    store(y + offsets[1] + j * y_step, softmax_value(load(x + offsets[0] + j * x_step), state.max, scale, log));
  }
}

// ==== kernels: backward =======================================================================

template <typename T, int kItems>
__global__ void softmax_warp_bwd(const T* g, const T* y, T* gi, OffsetCalculator<3> rows, int64_t num_rows, int n,
                                 bool log) {
  using V = opmath_t<T>;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y;
  if (row >= num_rows) return;
  const auto offsets = offsets_at(rows, row);
  const int lane = threadIdx.x;
  V gs[kItems], ys[kItems];
  V total = 0;
#pragma unroll
  for (int i = 0; i < kItems; ++i) {
    const int j = lane + 32 * i;
    gs[i] = j < n ? load(g + offsets[0] + j) : V(0);
    ys[i] = j < n ? load(y + offsets[1] + j) : V(0);
    total += log ? gs[i] : gs[i] * ys[i];
  }
  total = warp_allreduce(total, [](V a, V b) { return a + b; });
#pragma unroll
  for (int i = 0; i < kItems; ++i) {
    const int j = lane + 32 * i;
    if (j < n) store(gi + offsets[2] + j, softmax_grad(gs[i], ys[i], total, log));
  }
}

template <typename T, int kVec>
__global__ void softmax_block_bwd(const T* g, const T* y, T* gi, OffsetCalculator<3> rows, int64_t n, bool log) {
  using V = opmath_t<T>;
  using P = AlignedVector<T, kVec>;
  const auto offsets = offsets_at(rows, blockIdx.x);
  const T* gr = g + offsets[0];
  const T* yr = y + offsets[1];
  T* gir = gi + offsets[2];
  const int64_t vectors = n / kVec;
  V total = 0;
  for (int64_t v = threadIdx.x; v < vectors; v += blockDim.x) {
    const P gp = reinterpret_cast<const P*>(gr)[v];
    const P yp = reinterpret_cast<const P*>(yr)[v];
#pragma unroll
    for (int k = 0; k < kVec; ++k) total += log ? to_opmath(gp.values[k]) : to_opmath(gp.values[k]) * to_opmath(yp.values[k]);
  }
  for (int64_t j = vectors * kVec + threadIdx.x; j < n; j += blockDim.x) {
    total += log ? load(gr + j) : load(gr + j) * load(yr + j);
  }
  total = block_allreduce(total, [](V a, V b) { return a + b; });
  for (int64_t v = threadIdx.x; v < vectors; v += blockDim.x) {
    const P gp = reinterpret_cast<const P*>(gr)[v];
    const P yp = reinterpret_cast<const P*>(yr)[v];
    P out;
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      out.values[k] = from_opmath<T>(softmax_grad(to_opmath(gp.values[k]), to_opmath(yp.values[k]), total, log));
    }
    reinterpret_cast<P*>(gir)[v] = out;
  }
  for (int64_t j = vectors * kVec + threadIdx.x; j < n; j += blockDim.x) {
    store(gir + j, softmax_grad(load(gr + j), load(yr + j), total, log));
  }
}

template <typename T>
__global__ void softmax_strided_bwd(const T* g, const T* y, T* gi, OffsetCalculator<3> rows, int64_t num_rows,
                                    int64_t n, int64_t g_step, int64_t y_step, int64_t gi_step, bool log) {
  using V = opmath_t<T>;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (row >= num_rows) return;
  const auto offsets = offsets_at(rows, row);
  V total = 0;
  for (int64_t j = 0; j < n; ++j) {
    const V gj = load(g + offsets[0] + j * g_step);
    total += log ? gj : gj * load(y + offsets[1] + j * y_step);
  }
  for (int64_t j = 0; j < n; ++j) {
    store(gi + offsets[2] + j * gi_step,
          softmax_grad(load(g + offsets[0] + j * g_step), load(y + offsets[1] + j * y_step), total, log));
  }
}

// ==== launchers ===============================================================================

// The rows of up to three same-shaped operands along `dim`: the other dims coalesced.
struct SoftmaxRows {
  OffsetCalculator<3> rows;
  int64_t num_rows = 1;
  int64_t n = 1;
  int64_t steps[3] = {0, 0, 0};
  bool contiguous_rows = false;  // stride 1 along dim in every operand
  bool aligned_16 = false;       // every row of every operand starts 16-byte aligned
};

SoftmaxRows make_rows(const std::vector<const Tensor*>& operands, int64_t dim, const char* op) {
  const Tensor& first = *operands.front();
  for (const Tensor* t : operands) {
    KILN_ASSERT(t->sizes() == first.sizes() && t->dtype() == first.dtype() && t->device() == first.device(), op,
                ": operands differ: ", t->sizes(), " ", t->dtype(), " vs ", first.sizes(), " ", first.dtype());
  }
  SoftmaxRows r;
  r.n = first.dim() == 0 ? 1 : first.sizes()[dim];
  const int64_t vec = 16 / static_cast<int64_t>(itemsize(first.dtype()));
  ReduceDims others;
  r.contiguous_rows = true;
  r.aligned_16 = true;
  for (size_t k = 0; k < operands.size(); ++k) {
    const Tensor& t = *operands[k];
    r.steps[k] = t.dim() == 0 ? 0 : t.strides()[dim];
    r.contiguous_rows = r.contiguous_rows && r.steps[k] == 1;
    r.aligned_16 = r.aligned_16 && reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0;
  }
  for (int64_t d = 0; d < first.dim(); ++d) {
    if (d == dim || first.sizes()[d] == 1) continue;
    ReduceDim p{first.sizes()[d], {0, 0, 0}};
    for (size_t k = 0; k < operands.size(); ++k) {
      p.strides[k] = operands[k]->strides()[d];
      r.aligned_16 = r.aligned_16 && p.strides[k] % vec == 0;
    }
    others.push_back(p);
  }
  others = coalesce_dims(std::move(others));
  r.num_rows = 1;
  for (const ReduceDim& p : others) r.num_rows *= p.size;
  KILN_CHECK(others.size() <= static_cast<size_t>(kMaxOffsetDims) &&
                 (others.size() == 1 || r.num_rows < (int64_t{1} << 31)),
             op, ": tensors of ", first.sizes(), " with strides ", first.strides(),
             " have too many scattered rows for the CUDA kernels; make the input contiguous");
  r.rows = offset_calculator_of<3>(others, 0);
  return r;
}

// Threads of a block-per-row kernel: about 8 loads each, 128 to 1024.
int block_threads(int64_t n, int vec) {
  int threads = 128;
  while (threads < 1024 && threads * vec * 8 < n) threads *= 2;
  return threads;
}

// Calls fn.template operator()<kItems>() with the smallest register row that holds n.
template <typename F>
void with_warp_items(int64_t n, const F& fn) {
  if (n <= 128) {
    fn.template operator()<4>();
  } else if (n <= 256) {
    fn.template operator()<8>();
  } else if (n <= 512) {
    fn.template operator()<16>();
  } else {
    fn.template operator()<32>();
  }
}

template <typename T>
void softmax_fwd(const Tensor& in, const Tensor& out, const SoftmaxRows& r, bool log, cudaStream_t stream) {
  const T* x = static_cast<const T*>(in.data_ptr());
  T* y = static_cast<T*>(out.data_ptr());
  constexpr int kVec = static_cast<int>(16 / sizeof(T));
  if (r.contiguous_rows && r.n <= kWarpRowMax) {
    const dim3 block(32, kWarpRowsPerBlock);
    const auto grid = grid_dim(ceil_div(r.num_rows, kWarpRowsPerBlock));  // asserts it fits grid.x
    with_warp_items(r.n, [&]<int kItems>() {
      softmax_warp_fwd<T, kItems><<<grid, block, 0, stream>>>(x, y, r.rows, r.num_rows, static_cast<int>(r.n), log);
    });
  } else if (r.contiguous_rows) {
    const auto grid = grid_dim(r.num_rows);
    if (r.aligned_16) {
      softmax_block_fwd<T, kVec><<<grid, block_threads(r.n, kVec), 0, stream>>>(x, y, r.rows, r.n, log);
    } else {
      softmax_block_fwd<T, 1><<<grid, block_threads(r.n, 1), 0, stream>>>(x, y, r.rows, r.n, log);
    }
  } else {
    const auto grid = grid_dim(ceil_div(r.num_rows, kBlockThreads));
    softmax_strided_fwd<T><<<grid, kBlockThreads, 0, stream>>>(x, y, r.rows, r.num_rows, r.n, r.steps[0],
                                                                 r.steps[1], log);
  }
  KILN_CUDA_CHECK_LAUNCH();
}

template <typename T>
void softmax_bwd(const Tensor& grad_out, const Tensor& out, const Tensor& grad_in, const SoftmaxRows& r, bool log,
                 cudaStream_t stream) {
  const T* g = static_cast<const T*>(grad_out.data_ptr());
  const T* y = static_cast<const T*>(out.data_ptr());
  T* gi = static_cast<T*>(grad_in.data_ptr());
  constexpr int kVec = static_cast<int>(16 / sizeof(T));
  if (r.contiguous_rows && r.n <= kWarpRowMax) {
    const dim3 block(32, kWarpRowsPerBlock);
    const auto grid = grid_dim(ceil_div(r.num_rows, kWarpRowsPerBlock));  // asserts it fits grid.x
    with_warp_items(r.n, [&]<int kItems>() {
      softmax_warp_bwd<T, kItems><<<grid, block, 0, stream>>>(g, y, gi, r.rows, r.num_rows, static_cast<int>(r.n), log);
    });
  } else if (r.contiguous_rows) {
    const auto grid = grid_dim(r.num_rows);
    if (r.aligned_16) {
      softmax_block_bwd<T, kVec><<<grid, block_threads(r.n, kVec), 0, stream>>>(g, y, gi, r.rows, r.n, log);
    } else {
      softmax_block_bwd<T, 1><<<grid, block_threads(r.n, 1), 0, stream>>>(g, y, gi, r.rows, r.n, log);
    }
  } else {
    const auto grid = grid_dim(ceil_div(r.num_rows, kBlockThreads));
    softmax_strided_bwd<T><<<grid, kBlockThreads, 0, stream>>>(g, y, gi, r.rows, r.num_rows, r.n, r.steps[0],
                                                                 r.steps[1], r.steps[2], log);
  }
  KILN_CUDA_CHECK_LAUNCH();
}

}  // namespace

void CudaBackend::softmax(const Tensor& in, int64_t dim, bool log, const Tensor& out) {
  const char* name = log ? "log_softmax" : "softmax";
  const SoftmaxRows rows = make_rows({&in, &out}, dim, name);
  if (in.numel() == 0) return;
  const int device = in.device().index;
  const OnDevice on(device);
  visit_dtype<kFloatingTypes>(in.dtype(), name, [&]<typename T>() { softmax_fwd<T>(in, out, rows, log, on.stream.handle()); });
}

void CudaBackend::softmax_backward(const Tensor& grad_out, const Tensor& out, int64_t dim, bool log,
                                   const Tensor& grad_in) {
  const char* name = log ? "log_softmax_backward" : "softmax_backward";
  const SoftmaxRows rows = make_rows({&grad_out, &out, &grad_in}, dim, name);
  if (out.numel() == 0) return;
  const int device = out.device().index;
  const OnDevice on(device);
  visit_dtype<kFloatingTypes>(out.dtype(), name, [&]<typename T>() {
    softmax_bwd<T>(grad_out, out, grad_in, rows, log, on.stream.handle());
  });
}

}  // namespace kiln::cuda
