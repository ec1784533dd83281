// CudaBackend batch normalisation pieces (Note [Batch norm pieces] in core/backend.h).
//
// Math, per channel c over its m = N * S values (S = the spatial volume), as the CPU
// (kernels/cpu/batch_norm.cpp):
//   stats:            mean[c] = sum x / m,  var[c] = sum (x - mean)^2 / m    (biased)
//   apply:            y = (x - mean) * (invstd * weight) + bias   (max(y, 0) with relu,
//                     max(y + residual, 0) with the fused add)
//   backward_reduce:  sum_dy[c] = sum dy,  sum_dy_xmu[c] = sum dy (x - mean)  (and grad_y = dy
//                     with the fused add)
//   backward_input:   dx = (dy - sum_dy / count - (x - mean) invstd^2 sum_dy_xmu / count)
//                          * invstd * weight
// weight / bias undefined mean 1 / 0. With relu, dy is grad_out masked by y > 0, y
// recomputed from x (Note [Batch norm with ReLU] in core/backend.h) by the one inline
// expression of kernels/batch_norm_math.h in all three kernels, so nvcc contracts it into
// the same FMA in each and the mask matches the forward's output exactly. With the fused
// add the mask is output > 0 instead (Note [Batch norm, add and ReLU]).
// Every kernel overwrites its outputs (=, never +=).
// Half and bfloat16 load and compute in float (Note [Opmath]); per-channel tensors are in
// the statistics type (float, or double for double input); so are the accumulators.
//
// Layout: input, grad_out, out, grad_in contiguous [N, C, *], seen as [N, C, S]: N * C
// rows of S contiguous values, row r = n * C + c. Channels-last operands (all of them,
// kernels/channel_layout.h) go to batch_norm_channels_last.cu. Per-channel tensors contiguous [C].
// Offsets are 64-bit. When S is a multiple of the 16-byte vector width and every big
// operand starts 16-byte aligned, rows are read and written as 16-byte vectors (kVec
// values); otherwise one value at a time.
//
// Launch shapes. Every kernel uses one block shape (RowTiles): 256 threads as tx x ty,
// tx = the smallest power of two >= the row's vectors (at most 256), ty = 256 / tx, so a
// warp reads tx consecutive vectors of ty rows: coalesced whether S is 32^3 or 1.
//   Reductions (stats, backward_reduce): grid (C, splits). Block (c, split) reduces the
//     rows n of channel c in its split's row range and column range; each thread keeps a
//     state (Welford: a 16-byte vector's own mean and M2, merged into the thread's state
//     by Chan et al.'s formula, one division per vector; backward: two sums), merged
//     across the block in a fixed order (block_reduce, block_reduce.cuh).
//     With C alone the grid would be too small for few channels and big volumes ([8, 64,
//     32^3] is 64 blocks on 132 SMs), so channels are split until the grid has about
//     4 blocks per SM (each keeping >= kMinBlockWork values); the split blocks write
//     partial states to a caching-allocator workspace and a finalize kernel merges each
//     channel's partials in split order. Deterministic: nothing depends on timing.
//   Elementwise (apply, backward_input): grid (row blocks, column blocks); a thread
//     walks rows (c = row % C, its per-channel coefficients computed once per row) and
//     the row's vectors, grid-strided in both.
// Every launch is on the current stream and checked.
#include <algorithm>
#include <cstdint>
#include <limits>

#include "core/dispatch.h"
#include "core/kernel_memory.h"
#include "kernels/batch_norm_math.h"
#include "kernels/batch_norm_operands.h"
#include "kernels/cuda/aligned_vector.cuh"
#include "kernels/cuda/batch_norm_channels_last.h"
#include "kernels/cuda/batch_norm_reducers.cuh"
#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/channel_finalize.cuh"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_types.cuh"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/warp_shuffle.cuh"
#include "kernels/reduce_ops.h"  // WelfordState, WelfordOp::combine

namespace kiln::cuda {
namespace {

inline constexpr int64_t kMinBlockWork = 4096;  // values a split block reduces at least
inline constexpr int kBlocksPerSm = 4;

// ==== block shape and reduction plan ==========================================================

// [N, C, S] in units of kVec-value vectors along S, and how a block tiles rows and columns.
struct RowTiles {
  int64_t n = 1, c = 1, vectors = 1;  // vectors per row (S / kVec)
  int tx = 1, ty = kBlockThreads;
  // Reductions only: each channel's rows split in n_splits ranges of rows_per_split, and
  // its columns in s_splits ranges of cols_per_split vectors; grid.y = n_splits * s_splits.
  int64_t rows_per_split = 1, cols_per_split = 1, n_splits = 1, s_splits = 1;
};

// ==== device helpers ===========================================================================

__device__ __forceinline__ int64_t smaller(int64_t a, int64_t b) { return a < b ? a : b; }

// ==== reducers: what a channel reduction computes ==============================================
// State identity(), State combine(State, State) and void write(State, c) come from
// batch_norm_reducers.cuh; State add(State, i) folds in vector i (kVec values) of the big
// operands; begin_channel(c) loads per-channel inputs once per thread.

template <typename T, int kVec>
struct StatsReducer : StatsOutput<T> {
  using V = opmath_t<T>;
  using State = typename StatsOutput<T>::State;
  const T* x;
  __device__ void begin_channel(int64_t) {}
  __device__ State add(State s, int64_t i) const {
    const AlignedVector<T, kVec> p = reinterpret_cast<const AlignedVector<T, kVec>*>(x)[i];
    V values[kVec], sum = 0;
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      values[k] = to_opmath(p.values[k]);
      sum += values[k];
    }
    const V mean = sum / V(kVec);
    V m2 = 0;
#pragma unroll
    for (int k = 0; k < kVec; ++k) m2 += (values[k] - mean) * (values[k] - mean);
    return this->combine(s, State{mean, m2, kVec});
  }
};

// Relu: dy masked by y > 0 (invstd, weight, bias read only then); AddRelu: by output > 0,
// and written to grad_y.
template <typename T, int kVec, batch_norm_math::Tail kTail>
struct GradSumsReducer : GradSumsOutput<T> {
  using V = opmath_t<T>;
  using State = typename GradSumsOutput<T>::State;
  using Tail = batch_norm_math::Tail;
  batch_norm_math::GradOperands<T, V> in;
  batch_norm_math::Channel<V> channel{};
  __device__ void begin_channel(int64_t c) { channel = batch_norm_math::grad_channel<kTail>(in, c); }
  __device__ State add(State s, int64_t i) const {
    using P = AlignedVector<T, kVec>;
    const P g = reinterpret_cast<const P*>(in.dy)[i];
    const P p = reinterpret_cast<const P*>(in.x)[i];
    P o, masked;
    if constexpr (kTail == Tail::AddRelu) o = reinterpret_cast<const P*>(in.output)[i];
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      const V out_k = kTail == Tail::AddRelu ? to_opmath(o.values[k]) : V(0);
      masked.values[k] =
          from_opmath<T>(fold_grad<kTail>(s, channel, to_opmath(p.values[k]), to_opmath(g.values[k]), out_k));
    }
    if constexpr (kTail == Tail::AddRelu) reinterpret_cast<P*>(in.grad_y)[i] = masked;
    return s;
  }
};

// ==== kernels: reductions ======================================================================

// Block (c, split) reduces its part of channel c: written out when the channel is not
// split, else parked in partials[c * splits + split] for channel_finalize.
template <typename R>
__global__ void __launch_bounds__(kBlockThreads) channel_reduce(R r, RowTiles t, typename R::State* partials) {
  const int64_t c = blockIdx.x;
  const int64_t split = blockIdx.y;
  const int64_t n_begin = split / t.s_splits * t.rows_per_split;
  const int64_t n_end = smaller(t.n, n_begin + t.rows_per_split);
  const int64_t v_begin = split % t.s_splits * t.cols_per_split;
  const int64_t v_end = smaller(t.vectors, v_begin + t.cols_per_split);
  r.begin_channel(c);
  typename R::State state = r.identity();
  for (int64_t n = n_begin + threadIdx.y; n < n_end; n += blockDim.y) {
    const int64_t row = (n * t.c + c) * t.vectors;  // in vectors
    for (int64_t v = v_begin + threadIdx.x; v < v_end; v += blockDim.x) state = r.add(state, row + v);
  }
  state = block_reduce(
      state, [&](const typename R::State& a, const typename R::State& b) { return r.combine(a, b); });
  if (threadIdx.x == 0 && threadIdx.y == 0) {
    if (gridDim.y == 1) {
      r.write(state, c);
    } else {
      partials[c * gridDim.y + split] = state;
    }
  }
}

// ==== kernels: elementwise =====================================================================

// y = (x - mean) * scale + shift, scale = invstd * weight, shift = bias; then kTail's
// max(y, 0) or max(y + residual, 0).
template <typename T, int kVec, batch_norm_math::Tail kTail>
__global__ void __launch_bounds__(kBlockThreads)
    batch_norm_apply_fwd(const T* x, const T* residual, T* y, const opmath_t<T>* mean,
                         const opmath_t<T>* invstd, const opmath_t<T>* weight, const opmath_t<T>* bias,
                         RowTiles t) {
  using V = opmath_t<T>;
  using P = AlignedVector<T, kVec>;
  const int64_t rows = t.n * t.c;
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y; r < rows;
       r += static_cast<int64_t>(gridDim.x) * blockDim.y) {
    const batch_norm_math::Channel<V> ch = batch_norm_math::channel(mean, invstd, weight, bias, r % t.c);
    const P* xr = reinterpret_cast<const P*>(x) + r * t.vectors;
    const P* rr = reinterpret_cast<const P*>(residual) + r * t.vectors;
    P* yr = reinterpret_cast<P*>(y) + r * t.vectors;
    for (int64_t v = static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x; v < t.vectors;
         v += static_cast<int64_t>(gridDim.y) * blockDim.x) {
      const P p = xr[v];
      P res, out;
      if constexpr (kTail == batch_norm_math::Tail::AddRelu) res = rr[v];
#pragma unroll
      for (int k = 0; k < kVec; ++k) {
        const V rk = kTail == batch_norm_math::Tail::AddRelu ? to_opmath(res.values[k]) : V(0);
        out.values[k] =
            from_opmath<T>(batch_norm_math::output<kTail>(ch.normalize(to_opmath(p.values[k])), rk));
      }
      yr[v] = out;
    }
  }
}

// dx = (dy - sum_dy / count - (x - mean) * proj) * scale, proj = sum_dy_xmu / count * invstd^2,
// scale = invstd * weight; with kRelu dy masked by y > 0.
template <typename T, int kVec, bool kRelu>
__global__ void __launch_bounds__(kBlockThreads) batch_norm_input_bwd(const T* dy, const T* x, T* dx,
                                                                  const opmath_t<T>* mean, const opmath_t<T>* invstd,
                                                                  const opmath_t<T>* weight, const opmath_t<T>* bias,
                                                                  const opmath_t<T>* sum_dy,
                                                                  const opmath_t<T>* sum_dy_xmu, opmath_t<T> inv_count,
                                                                  RowTiles t) {
  using V = opmath_t<T>;
  using P = AlignedVector<T, kVec>;
  const int64_t rows = t.n * t.c;
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y; r < rows;
       r += static_cast<int64_t>(gridDim.x) * blockDim.y) {
    const int64_t c = r % t.c;
    const batch_norm_math::Channel<V> ch = batch_norm_math::channel(mean, invstd, weight, bias, c);
    const V mean_dy = sum_dy[c] * inv_count;
    const V proj = sum_dy_xmu[c] * inv_count * invstd[c] * invstd[c];
    const P* gr = reinterpret_cast<const P*>(dy) + r * t.vectors;
    const P* xr = reinterpret_cast<const P*>(x) + r * t.vectors;
    P* dxr = reinterpret_cast<P*>(dx) + r * t.vectors;
    for (int64_t v = static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x; v < t.vectors;
         v += static_cast<int64_t>(gridDim.y) * blockDim.x) {
      const P g = gr[v], p = xr[v];
      P out;
#pragma unroll
      for (int k = 0; k < kVec; ++k) {
        const V xk = to_opmath(p.values[k]);
        const V gk = batch_norm_math::grad_of_y<kRelu>(to_opmath(g.values[k]), kRelu ? ch.normalize(xk) : V(0));
        out.values[k] = from_opmath<T>((gk - mean_dy - (xk - ch.mean) * proj) * ch.scale);
      }
      dxr[v] = out;
    }
  }
}

// ==== launchers ================================================================================

unsigned grid_size(int64_t n, int64_t limit) {
  KILN_ASSERT(n >= 1, "batch_norm: grid dimension ", n);
  return static_cast<unsigned>(std::min(n, limit));
}

// Vector width for the big operands: 16 bytes when S divides into vectors and each
// (defined one) starts 16-byte aligned (then every row does: rows are S values apart).
template <typename T>
int vector_width(const Tensor& input, std::initializer_list<const Tensor*> big) {
  constexpr int kVec = static_cast<int>(16 / sizeof(T));
  int64_t s = 1;
  for (int64_t d = 2; d < input.dim(); ++d) s *= input.sizes()[d];
  if (s % kVec != 0) return 1;
  for (const Tensor* t : big) {  // undefined: an operand this call does not have
    if (t->defined() && reinterpret_cast<uintptr_t>(t->data_ptr()) % 16 != 0) return 1;
  }
  return kVec;
}

RowTiles row_tiles(const Tensor& input, int vec) {
  RowTiles t;
  t.n = input.sizes()[0];
  t.c = input.sizes()[1];
  int64_t s = 1;
  for (int64_t d = 2; d < input.dim(); ++d) s *= input.sizes()[d];
  t.vectors = s / vec;
  t.tx = 1;
  while (t.tx < kBlockThreads && t.tx < t.vectors) t.tx *= 2;
  t.ty = kBlockThreads / t.tx;
  return t;
}

// Splits each channel over grid.y until the grid has about kBlocksPerSm blocks per SM
// (see the header), first over rows (whole rows per block), then over columns.
void plan_splits(RowTiles& t, int device, int vec) {
  if (t.n == 0 || t.vectors == 0) return;  // nothing to read: one block per channel writes the empty state
  const int64_t target = static_cast<int64_t>(kBlocksPerSm) * device_properties(device).multiprocessors;
  const int64_t per_channel = t.n * t.vectors * vec;
  int64_t wanted = std::max<int64_t>(1, std::min(ceil_div(target, t.c), per_channel / kMinBlockWork));
  t.n_splits = std::min(t.n, wanted);
  t.rows_per_split = ceil_div(t.n, t.n_splits);
  t.n_splits = ceil_div(t.n, t.rows_per_split);
  const int64_t max_s_splits = std::max<int64_t>(1, t.vectors / t.tx);  // >= tx vectors a block
  t.s_splits = std::min(max_s_splits, ceil_div(wanted, t.n_splits));
  t.cols_per_split = ceil_div(t.vectors, t.s_splits);
  t.s_splits = ceil_div(t.vectors, t.cols_per_split);
}

// Runs reducer R over every channel as `t` plans it.
template <typename R>
void launch_channel_reduce(const R& r, const RowTiles& t, int device, cudaStream_t stream) {
  using State = typename R::State;
  const int64_t splits = t.n_splits * t.s_splits;
  KILN_ASSERT(splits <= 65535 && t.c <= INT32_MAX, "batch_norm: ", splits, " splits of ", t.c, " channels");
  Tensor workspace;  // the split's partial states, freed (stream-ordered) on return
  State* partials = nullptr;
  if (splits > 1) {
    const int64_t bytes = t.c * splits * static_cast<int64_t>(sizeof(State));
    workspace = allocate_workspace(bytes, Device::cuda(device));
    partials = static_cast<State*>(workspace.data_ptr());
  }
  const dim3 grid(static_cast<unsigned>(t.c), static_cast<unsigned>(splits));
  channel_reduce<R><<<grid, dim3(t.tx, t.ty), 0, stream>>>(r, t, partials);
  KILN_CUDA_CHECK_LAUNCH();
  if (splits > 1) {
    channel_finalize<R><<<grid_size(ceil_div(t.c, kFinalizeThreads), INT32_MAX), kFinalizeThreads, 0, stream>>>(
        r, partials, t.c, splits);
    KILN_CUDA_CHECK_LAUNCH();
  }
}

// Grid of an elementwise pass: blocks of ty rows in x, blocks of tx vectors in y, each
// thread handling about 4 vectors of a row when rows are long.
dim3 elementwise_grid(const RowTiles& t) {
  constexpr int64_t kVectorsPerThread = 4;
  const int64_t row_blocks = ceil_div(t.n * t.c, t.ty);
  const int64_t col_blocks = ceil_div(t.vectors, t.tx * kVectorsPerThread);
  return dim3(grid_size(row_blocks, INT32_MAX), grid_size(col_blocks, 65535));
}

// Calls fn.template operator()<T, kVec>() for the input's dtype and vector width.
template <typename F>
void visit_vectorized(const Tensor& input, std::initializer_list<const Tensor*> big, const char* op, const F& fn) {
  visit_dtype<kFloatingTypes>(input.dtype(), op, [&]<typename T>() {
    constexpr int kVec = static_cast<int>(16 / sizeof(T));
    if (vector_width<T>(input, big) == kVec) {
      fn.template operator()<T, kVec>();
    } else {
      fn.template operator()<T, 1>();
    }
  });
}

}  // namespace

void CudaBackend::batch_norm_stats(const Tensor& input, const Tensor& mean, const Tensor& var) {
  constexpr const char* kOp = "batch_norm_stats";
  const ChannelOrder order = check_stats(input, mean, var);
  if (input.sizes()[1] == 0) return;
  const int device = input.device().index;
  const OnDevice on(device);
  if (order == ChannelOrder::Last)
    return batch_norm_channels_last::stats(input, mean, var, device, on.stream.handle());
  visit_vectorized(input, {&input}, kOp, [&]<typename T, int kVec>() {
    using V = opmath_t<T>;
    RowTiles t = row_tiles(input, kVec);
    plan_splits(t, device, kVec);
    const StatsReducer<T, kVec> r{{static_cast<V*>(mean.data_ptr()), static_cast<V*>(var.data_ptr())},
                                  static_cast<const T*>(input.data_ptr())};
    launch_channel_reduce(r, t, device, on.stream.handle());
  });
}

void CudaBackend::batch_norm_apply(const Tensor& input, const BatchNormCoefficients& norm, const Tensor& out) {
  constexpr const char* kOp = "batch_norm_apply";
  const BatchNormCall call = check_apply(input, norm, out);
  if (input.numel() == 0) return;
  const int device = input.device().index;
  const OnDevice on(device);
  if (call.order == ChannelOrder::Last)
    return batch_norm_channels_last::apply(input, norm, out, call.tail, device, on.stream.handle());
  visit_vectorized(input, {&input, &out, &norm.residual}, kOp, [&]<typename T, int kVec>() {
    using V = opmath_t<T>;
    const RowTiles t = row_tiles(input, kVec);
    batch_norm_math::with_tail(call.tail, [&](auto tail_value) {
      constexpr batch_norm_math::Tail kTail = decltype(tail_value)::value;
      batch_norm_apply_fwd<T, kVec, kTail><<<elementwise_grid(t), dim3(t.tx, t.ty), 0, on.stream.handle()>>>(
          static_cast<const T*>(input.data_ptr()), data_or_null<T>(norm.residual),
          static_cast<T*>(out.data_ptr()), data_or_null<V>(norm.mean), data_or_null<V>(norm.invstd),
          data_or_null<V>(norm.weight), data_or_null<V>(norm.bias), t);
      KILN_CUDA_CHECK_LAUNCH();
    });
  });
}

void CudaBackend::batch_norm_backward_reduce(const Tensor& grad_out, const Tensor& input,
                                             const BatchNormCoefficients& norm, const Tensor& sum_dy,
                                             const Tensor& sum_dy_xmu, const Tensor& grad_y) {
  constexpr const char* kOp = "batch_norm_backward_reduce";
  const BatchNormCall call = check_backward_reduce(grad_out, input, norm, sum_dy, sum_dy_xmu, grad_y);
  if (input.sizes()[1] == 0) return;
  const int device = input.device().index;
  const OnDevice on(device);
  if (call.order == ChannelOrder::Last) {
    return batch_norm_channels_last::backward_reduce(grad_out, input, norm, sum_dy, sum_dy_xmu, grad_y,
                                                     call.tail, device, on.stream.handle());
  }
  visit_vectorized(input, {&input, &grad_out, &norm.output, &grad_y}, kOp, [&]<typename T, int kVec>() {
    using V = opmath_t<T>;
    RowTiles t = row_tiles(input, kVec);
    plan_splits(t, device, kVec);
    batch_norm_math::with_tail(call.tail, [&](auto tail_value) {
      constexpr batch_norm_math::Tail kTail = decltype(tail_value)::value;
      const GradSumsReducer<T, kVec, kTail> r{
          {static_cast<V*>(sum_dy.data_ptr()), static_cast<V*>(sum_dy_xmu.data_ptr())},
          grad_operands<T, V>(grad_out, input, norm, grad_y)};
      launch_channel_reduce(r, t, device, on.stream.handle());
    });
  });
}

void CudaBackend::batch_norm_backward_input(const Tensor& grad_out, const Tensor& input,
                                            const BatchNormCoefficients& norm, const Tensor& sum_dy,
                                            const Tensor& sum_dy_xmu, int64_t count, const Tensor& grad_in) {
  constexpr const char* kOp = "batch_norm_backward_input";
  const BatchNormCall call = check_backward_input(grad_out, input, norm, sum_dy, sum_dy_xmu, count, grad_in);
  const bool relu = call.tail == batch_norm_math::Tail::Relu;
  if (input.numel() == 0) return;
  const int device = input.device().index;
  const OnDevice on(device);
  if (call.order == ChannelOrder::Last) {
    return batch_norm_channels_last::backward_input(grad_out, input, norm, sum_dy, sum_dy_xmu, count, grad_in,
                                                    relu, device, on.stream.handle());
  }
  visit_vectorized(input, {&input, &grad_out, &grad_in}, kOp, [&]<typename T, int kVec>() {
    using V = opmath_t<T>;
    const RowTiles t = row_tiles(input, kVec);
    batch_norm_math::with_relu(relu, [&](auto relu_flag) {
      constexpr bool kRelu = decltype(relu_flag)::value;
      batch_norm_input_bwd<T, kVec, kRelu><<<elementwise_grid(t), dim3(t.tx, t.ty), 0, on.stream.handle()>>>(
          static_cast<const T*>(grad_out.data_ptr()), static_cast<const T*>(input.data_ptr()),
          static_cast<T*>(grad_in.data_ptr()), data_or_null<V>(norm.mean), data_or_null<V>(norm.invstd),
          data_or_null<V>(norm.weight), data_or_null<V>(norm.bias), data_or_null<V>(sum_dy),
          data_or_null<V>(sum_dy_xmu), V(1) / static_cast<V>(count), t);
      KILN_CUDA_CHECK_LAUNCH();
    });
  });
}

}  // namespace kiln::cuda
