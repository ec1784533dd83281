// CudaBackend batch normalisation for channels-last operands (NDHWC / NHWC): the same four
// pieces and math as batch_norm.cu (Note [Batch norm pieces] in core/backend.h), laid out
// as M = N * S rows of C contiguous values (channel c of row r at r * C + c;
// kernels/channel_layout.h). Half and bfloat16 compute in float (Note [Opmath]); the
// per-channel tensors and accumulators are in the statistics type.
//
// Vectors: when C is a multiple of the 16-byte width and every big operand starts
// 16-byte aligned, a thread loads kVec consecutive channels of a row as one vector (rows
// are C values apart, so every row is aligned too); otherwise one value.
//
// Reductions (stats, backward_reduce). A block is tx x ty threads (256): tx threads
// across the channel vectors of a row (the smallest power of two >= C / kVec, at most
// 32), ty down the rows, so a warp reads 32 consecutive vectors of a row (or whole short
// rows): coalesced. Thread (x, y) of block (bx, by) owns channels c0 .. c0 + kVec - 1,
// c0 = (bx tx + x) kVec, and folds rows by_begin + y, + ty, ... of its split into kVec
// states (Welford: one value at a time, WelfordOp::reduce; backward: two sums). The ty
// threads of a channel then combine in shared memory by a fixed tree (block_reduce_columns,
// block_reduce.cuh), and thread y = 0
// writes the result, or, when the rows are split over grid.y, parks it in
// partials[c * splits + split] for channel_finalize (channel_finalize.cuh), which merges
// a channel's splits in order. Splits: as many as make the grid about kBlocksPerSm
// blocks per SM, each block reading at least kMinBlockRows rows. Deterministic: nothing
// depends on timing.
//
// The fused add (Note [Batch norm, add and ReLU] in core/backend.h): apply adds the
// residual before the ReLU; backward_reduce masks by the output and writes grad_y.
//
// Elementwise (apply, backward_input): one thread per vector of kVec channels of a row,
// grid-strided over the M * C / kVec vectors; its channels' coefficients are read from
// the [C] arrays (L1/L2-resident: the same C values for every row).
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
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_types.cuh"
#include "kernels/cuda/launch.h"
#include "kernels/reduce_ops.h"  // WelfordState, WelfordOp

namespace kiln::cuda::batch_norm_channels_last {
namespace {

inline constexpr int kBlocksPerSm = 4;
inline constexpr int64_t kMinBlockRows = 64;  // rows a split block reads at least
inline constexpr int kMaxTx = 32;

// [M, C] rows and how the reduction tiles them.
struct RowsPlan {
  int64_t rows = 0, channels = 1;
  int64_t vectors = 1;  // channel vectors per row: C / kVec
  int tx = 1, ty = kBlockThreads;
  int64_t rows_per_split = 1, splits = 1;
};

// ==== reducers =================================================================================
// State identity(), State combine(State, State) and void write(State, c) come from
// batch_norm_reducers.cuh; void add(State (&s)[kVec], row, c0) folds channels c0.. of
// `row` into s.

template <typename T, int kVec>
struct StatsReducer : StatsOutput<T> {
  using V = opmath_t<T>;
  using State = typename StatsOutput<T>::State;
  const T* x;
  int64_t channels;
  __device__ void add(State (&s)[kVec], int64_t row, int64_t c0) const {
    const AlignedVector<T, kVec> p =
        *reinterpret_cast<const AlignedVector<T, kVec>*>(x + row * channels + c0);
#pragma unroll
    for (int k = 0; k < kVec; ++k)
      s[k] = reduce_ops::WelfordOp<T, V>{}.reduce(s[k], to_opmath(p.values[k]), 0);
  }
};

// Relu: dy masked by y > 0 (invstd, weight and bias read only then); AddRelu: by output >
// 0, and written to grad_y.
template <typename T, int kVec, batch_norm_math::Tail kTail>
struct GradSumsReducer : GradSumsOutput<T> {
  using V = opmath_t<T>;
  using State = typename GradSumsOutput<T>::State;
  using Tail = batch_norm_math::Tail;
  batch_norm_math::GradOperands<T, V> in;
  int64_t channels;
  __device__ void add(State (&s)[kVec], int64_t row, int64_t c0) const {
    using P = AlignedVector<T, kVec>;
    const int64_t offset = row * channels + c0;
    const P g = *reinterpret_cast<const P*>(in.dy + offset);
    const P p = *reinterpret_cast<const P*>(in.x + offset);
    P o, masked;
    if constexpr (kTail == Tail::AddRelu) o = *reinterpret_cast<const P*>(in.output + offset);
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      const batch_norm_math::Channel<V> ch = batch_norm_math::grad_channel<kTail>(in, c0 + k);
      const V out_k = kTail == Tail::AddRelu ? to_opmath(o.values[k]) : V(0);
      masked.values[k] =
          from_opmath<T>(fold_grad<kTail>(s[k], ch, to_opmath(p.values[k]), to_opmath(g.values[k]), out_k));
    }
    if constexpr (kTail == Tail::AddRelu) *reinterpret_cast<P*>(in.grad_y + offset) = masked;
  }
};

// ==== kernels ==================================================================================

template <typename R, int kVec>
__global__ void __launch_bounds__(kBlockThreads) rows_reduce(R r, RowsPlan p, typename R::State* partials) {
  using State = typename R::State;
  __shared__ State shared[kBlockThreads];
  const int64_t vector = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const bool active = vector < p.vectors;
  const int64_t c0 = vector * kVec;
  State s[kVec];
#pragma unroll
  for (int k = 0; k < kVec; ++k) s[k] = r.identity();
  if (active) {
    const int64_t row_begin = static_cast<int64_t>(blockIdx.y) * p.rows_per_split;
    const int64_t row_end = row_begin + p.rows_per_split < p.rows ? row_begin + p.rows_per_split : p.rows;
    for (int64_t row = row_begin + threadIdx.y; row < row_end; row += blockDim.y) r.add(s, row, c0);
  }
  // Combine the ty states of each channel: a tree over y, in a fixed order (block_reduce.cuh).
  const auto combine = [&](const State& a, const State& b) { return r.combine(a, b); };
#pragma unroll
  for (int k = 0; k < kVec; ++k) {
    const State total = block_reduce_columns(s[k], shared, combine);
    if (threadIdx.y == 0 && active) {
      if (gridDim.y == 1) {
        r.write(total, c0 + k);
      } else {
        partials[(c0 + k) * gridDim.y + blockIdx.y] = total;
      }
    }
  }
}

// y = (x - mean) * scale + shift per channel; then kTail's max(y, 0) or max(y + residual, 0).
template <typename T, int kVec, batch_norm_math::Tail kTail>
__global__ void __launch_bounds__(kBlockThreads)
    apply_rows(const T* x, const T* residual, T* y, const opmath_t<T>* mean, const opmath_t<T>* invstd,
               const opmath_t<T>* weight, const opmath_t<T>* bias, int64_t channels, int64_t vectors) {
  using V = opmath_t<T>;
  using P = AlignedVector<T, kVec>;
  for (int64_t v = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; v < vectors;
       v += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t c0 = v * kVec % channels;
    const P p = reinterpret_cast<const P*>(x)[v];
    P res, out;
    if constexpr (kTail == batch_norm_math::Tail::AddRelu) res = reinterpret_cast<const P*>(residual)[v];
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      const batch_norm_math::Channel<V> ch = batch_norm_math::channel(mean, invstd, weight, bias, c0 + k);
      const V rk = kTail == batch_norm_math::Tail::AddRelu ? to_opmath(res.values[k]) : V(0);
      out.values[k] =
          from_opmath<T>(batch_norm_math::output<kTail>(ch.normalize(to_opmath(p.values[k])), rk));
    }
    reinterpret_cast<P*>(y)[v] = out;
  }
}

// dx = (dy - sum_dy / count - (x - mean) * proj) * scale, proj = sum_dy_xmu / count *
// invstd^2; with kRelu dy masked by y > 0.
template <typename T, int kVec, bool kRelu>
__global__ void __launch_bounds__(kBlockThreads)
    input_bwd_rows(const T* dy, const T* x, T* dx, const opmath_t<T>* mean, const opmath_t<T>* invstd,
                   const opmath_t<T>* weight, const opmath_t<T>* bias, const opmath_t<T>* sum_dy,
                   const opmath_t<T>* sum_dy_xmu, opmath_t<T> inv_count, int64_t channels, int64_t vectors) {
  using V = opmath_t<T>;
  using P = AlignedVector<T, kVec>;
  for (int64_t v = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; v < vectors;
       v += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t c0 = v * kVec % channels;
    const P g = reinterpret_cast<const P*>(dy)[v], p = reinterpret_cast<const P*>(x)[v];
    P out;
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      const int64_t c = c0 + k;
      const batch_norm_math::Channel<V> ch = batch_norm_math::channel(mean, invstd, weight, bias, c);
      const V mean_dy = sum_dy[c] * inv_count;
      const V proj = sum_dy_xmu[c] * inv_count * invstd[c] * invstd[c];
      const V xk = to_opmath(p.values[k]);
      const V gk = batch_norm_math::grad_of_y<kRelu>(to_opmath(g.values[k]), kRelu ? ch.normalize(xk) : V(0));
      out.values[k] = from_opmath<T>((gk - mean_dy - (xk - ch.mean) * proj) * ch.scale);
    }
    reinterpret_cast<P*>(dx)[v] = out;
  }
}

// ==== launchers ================================================================================

int64_t rows_of(const Tensor& t) {
  const int64_t c = t.sizes()[1];
  return c == 0 ? 0 : t.numel() / c;
}

// Calls fn.template operator()<T, kVec>() for the input's dtype: kVec channels a vector
// when C divides into 16-byte vectors and every big operand is 16-byte aligned, else 1.
template <typename F>
void visit_vectorized(const Tensor& input, std::initializer_list<const Tensor*> big, const char* op,
                      const F& fn) {
  visit_dtype<kFloatingTypes>(input.dtype(), op, [&]<typename T>() {
    constexpr int kVec = static_cast<int>(16 / sizeof(T));
    bool aligned = input.sizes()[1] % kVec == 0;
    for (const Tensor* t : big)  // undefined: an operand this call does not have
      aligned = aligned && (!t->defined() || reinterpret_cast<uintptr_t>(t->data_ptr()) % 16 == 0);
    if (aligned) {
      fn.template operator()<T, kVec>();
    } else {
      fn.template operator()<T, 1>();
    }
  });
}

RowsPlan plan_rows(const Tensor& input, int vec, int device) {
  RowsPlan p;
  p.rows = rows_of(input);
  p.channels = input.sizes()[1];
  p.vectors = p.channels / vec;
  p.tx = 1;
  while (p.tx < kMaxTx && p.tx < p.vectors) p.tx *= 2;
  p.ty = kBlockThreads / p.tx;
  const int64_t column_blocks = ceil_div(p.vectors, p.tx);
  const int64_t target = static_cast<int64_t>(kBlocksPerSm) * device_properties(device).multiprocessors;
  const int64_t wanted = std::max<int64_t>(
      1, std::min({ceil_div(target, column_blocks), p.rows / kMinBlockRows, int64_t{65535}}));
  p.rows_per_split = std::max<int64_t>(1, ceil_div(p.rows, wanted));
  p.splits = std::max<int64_t>(1, ceil_div(p.rows, p.rows_per_split));
  return p;
}

template <typename R, int kVec>
void launch_rows_reduce(const R& r, const RowsPlan& p, int device, cudaStream_t stream) {
  using State = typename R::State;
  const int64_t column_blocks = ceil_div(p.vectors, p.tx);
  KILN_ASSERT(p.splits <= 65535 && column_blocks <= INT32_MAX, "batch_norm (channels-last): ", p.splits,
              " splits of ", p.channels, " channels");
  Tensor workspace;  // the splits' partial states, freed (stream-ordered) on return
  State* partials = nullptr;
  if (p.splits > 1) {
    workspace =
        allocate_workspace(p.channels * p.splits * static_cast<int64_t>(sizeof(State)), Device::cuda(device));
    partials = static_cast<State*>(workspace.data_ptr());
  }
  const dim3 grid(static_cast<unsigned>(column_blocks), static_cast<unsigned>(p.splits));
  rows_reduce<R, kVec><<<grid, dim3(p.tx, p.ty), 0, stream>>>(r, p, partials);
  KILN_CUDA_CHECK_LAUNCH();
  if (p.splits > 1) {
    channel_finalize<R>
        <<<static_cast<unsigned>(ceil_div(p.channels, kFinalizeThreads)), kFinalizeThreads, 0, stream>>>(
            r, partials, p.channels, p.splits);
    KILN_CUDA_CHECK_LAUNCH();
  }
}

constexpr int64_t kElementwiseBlocksPerSm = 8;

}  // namespace

void stats(const Tensor& input, const Tensor& mean, const Tensor& var, int device, cudaStream_t stream) {
  visit_vectorized(input, {&input}, "batch_norm_stats", [&]<typename T, int kVec>() {
    using V = opmath_t<T>;
    const RowsPlan p = plan_rows(input, kVec, device);
    const StatsReducer<T, kVec> r{{static_cast<V*>(mean.data_ptr()), static_cast<V*>(var.data_ptr())},
                                  static_cast<const T*>(input.data_ptr()),
                                  p.channels};
    launch_rows_reduce<decltype(r), kVec>(r, p, device, stream);
  });
}

void apply(const Tensor& input, const BatchNormCoefficients& norm, const Tensor& out,
           batch_norm_math::Tail tail, int device, cudaStream_t stream) {
  visit_vectorized(input, {&input, &out, &norm.residual}, "batch_norm_apply", [&]<typename T, int kVec>() {
    using V = opmath_t<T>;
    const int64_t vectors = input.numel() / kVec;
    const unsigned blocks = grid_stride_blocks(vectors, device, kElementwiseBlocksPerSm);
    batch_norm_math::with_tail(
        tail, [&](auto tail_value) {
          constexpr batch_norm_math::Tail kTail = decltype(tail_value)::value;
          apply_rows<T, kVec, kTail><<<blocks, kBlockThreads, 0, stream>>>(
              static_cast<const T*>(input.data_ptr()), data_or_null<T>(norm.residual),
              static_cast<T*>(out.data_ptr()), data_or_null<V>(norm.mean), data_or_null<V>(norm.invstd),
              data_or_null<V>(norm.weight), data_or_null<V>(norm.bias), input.sizes()[1], vectors);
          KILN_CUDA_CHECK_LAUNCH();
        });
  });
}

void backward_reduce(const Tensor& grad_out, const Tensor& input, const BatchNormCoefficients& norm,
                     const Tensor& sum_dy, const Tensor& sum_dy_xmu, const Tensor& grad_y,
                     batch_norm_math::Tail tail, int device, cudaStream_t stream) {
  const char* op = "batch_norm_backward_reduce";
  visit_vectorized(input, {&input, &grad_out, &norm.output, &grad_y}, op, [&]<typename T, int kVec>() {
    using V = opmath_t<T>;
    const RowsPlan p = plan_rows(input, kVec, device);
    batch_norm_math::with_tail(
        tail, [&](auto tail_value) {
          constexpr batch_norm_math::Tail kTail = decltype(tail_value)::value;
          const GradSumsReducer<T, kVec, kTail> r{
              {static_cast<V*>(sum_dy.data_ptr()), static_cast<V*>(sum_dy_xmu.data_ptr())},
              grad_operands<T, V>(grad_out, input, norm, grad_y),
              p.channels};
          launch_rows_reduce<decltype(r), kVec>(r, p, device, stream);
        });
  });
}

void backward_input(const Tensor& grad_out, const Tensor& input, const BatchNormCoefficients& norm,
                    const Tensor& sum_dy, const Tensor& sum_dy_xmu, int64_t count, const Tensor& grad_in,
                    bool relu, int device, cudaStream_t stream) {
  visit_vectorized(
      input, {&input, &grad_out, &grad_in}, "batch_norm_backward_input", [&]<typename T, int kVec>() {
        using V = opmath_t<T>;
        const int64_t vectors = input.numel() / kVec;
        const unsigned blocks = grid_stride_blocks(vectors, device, kElementwiseBlocksPerSm);
        batch_norm_math::with_relu(relu, [&](auto relu_flag) {
          constexpr bool kRelu = decltype(relu_flag)::value;
          input_bwd_rows<T, kVec, kRelu><<<blocks, kBlockThreads, 0, stream>>>(
              static_cast<const T*>(grad_out.data_ptr()), static_cast<const T*>(input.data_ptr()),
              static_cast<T*>(grad_in.data_ptr()), data_or_null<V>(norm.mean), data_or_null<V>(norm.invstd),
              data_or_null<V>(norm.weight), data_or_null<V>(norm.bias), data_or_null<V>(sum_dy),
              data_or_null<V>(sum_dy_xmu), V(1) / static_cast<V>(count), input.sizes()[1], vectors);
          KILN_CUDA_CHECK_LAUNCH();
        });
      });
}

}  // namespace kiln::cuda::batch_norm_channels_last
