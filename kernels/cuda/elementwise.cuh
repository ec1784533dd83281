// The CUDA elementwise engine: one pair of kernels for every unary, binary and ternary
// op, every cast, and fill.
//
//   out[i] = f(in_0[i], in_1[i], ...)   over operands of one shape, up to 1 + 3 of them
//
// The op layer has already broadcast the operands (stride 0) and cast them to the
// compute dtype; `f` takes and returns opmath values (float for Half/BFloat16, Note
// [Opmath] in core/dtype.h; bool for comparisons' outputs). The host side
// (run_elementwise) coalesces dims (StridedLoop, kernels/strided_loop.h), splits the
// problem so 32-bit indices suffice (Note [32-bit indexing], elementwise_plan.h) and
// launches, for each piece, one of two kernels:
//
//   elementwise_vectorized  every operand contiguous and aligned: each thread moves
//       16-byte vectors (kVec elements of the widest operand type, e.g. 4 floats or 8
//       halves; narrower operands move kVec elements too) in a grid-stride loop, and the
//       block's first threads do the last n % kVec elements one by one. The grid is
//       just enough blocks for the whole GPU to be resident (kWavesPerSm of them per
//       SM), so each thread streams many vectors: few blocks to schedule, many bytes in
//       flight, which is what reaching copy bandwidth takes.
//   elementwise_strided     anything else: a thread handles kStridedIlp elements
//       (kBlockThreads apart, so a warp's accesses stay coalesced where the layout
//       allows), computing all their offsets with the OffsetCalculator and loading all
//       their inputs before storing, so the loads overlap. Broadcast operands have
//       stride 0 and need nothing special.
//
// Out may alias an input elementwise (in-place ops): every element is read before it
// is written, by the thread that writes it. Only these two kernels exist per (functor,
// dtypes), which bounds compile time (STYLE 17); each op family's .cu file instantiates
// them for its own ops and dtypes only.
#pragma once

#include <cuda/std/tuple>

#include <cstdint>
#include <type_traits>
#include <utility>

#include "core/dispatch.h"
#include "core/tensor.h"
#include "kernels/cuda/aligned_vector.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_types.cuh"
#include "kernels/cuda/elementwise_families.h"
#include "kernels/cuda/elementwise_plan.h"
#include "kernels/cuda/launch.h"
#include "kernels/elementwise_ops.h"

namespace kiln::cuda {

inline constexpr int kStridedIlp = 4;
inline constexpr int kWavesPerSm = 4;

// ---- kernels --------------------------------------------------------------------------------

template <int kVec, typename F, typename Out, typename... In, size_t... I>
__device__ __forceinline__ void apply_vector(const F& f, Out* out, int64_t v,
                                             const ::cuda::std::tuple<AlignedVector<In, kVec>...>& in,
                                             std::index_sequence<I...>) {
  AlignedVector<Out, kVec> result;
#pragma unroll
  for (int j = 0; j < kVec; ++j) result.values[j] = from_opmath<Out>(f(to_opmath(::cuda::std::get<I>(in).values[j])...));
  reinterpret_cast<AlignedVector<Out, kVec>*>(out)[v] = result;
}

template <int kVec, typename F, typename Out, typename... In>
__global__ void __launch_bounds__(kBlockThreads)
elementwise_vectorized(int64_t n, F f, Out* out, const In*... in) {
  const int64_t vectors = n / kVec;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t v = first; v < vectors; v += step) {
    const ::cuda::std::tuple<AlignedVector<In, kVec>...> loaded{reinterpret_cast<const AlignedVector<In, kVec>*>(in)[v]...};
    apply_vector<kVec>(f, out, v, loaded, std::index_sequence_for<In...>{});
  }
  const int64_t tail = vectors * kVec + first;
  if (tail < n) out[tail] = from_opmath<Out>(f(to_opmath(in[tail])...));
}

template <int kOperands, typename F, typename Out, typename... In, size_t... I>
__device__ __forceinline__ void apply_strided(uint32_t n, const OffsetCalculator<kOperands>& calc, const F& f,
                                              Out* out, std::index_sequence<I...>, const In*... in) {
  const uint32_t first = blockIdx.x * (kBlockThreads * kStridedIlp) + threadIdx.x;
  Out results[kStridedIlp];
  int64_t out_offsets[kStridedIlp];
#pragma unroll
  for (int j = 0; j < kStridedIlp; ++j) {
    const uint32_t index = first + j * kBlockThreads;
    if (index < n) {
      const auto offsets = calc.get(index);
      out_offsets[j] = offsets[0];
      results[j] = from_opmath<Out>(f(to_opmath(in[offsets[I + 1]])...));
    }
  }
#pragma unroll
  for (int j = 0; j < kStridedIlp; ++j)
    if (first + j * kBlockThreads < n) out[out_offsets[j]] = results[j];
}

template <typename F, typename Out, typename... In>
__global__ void __launch_bounds__(kBlockThreads)
elementwise_strided(uint32_t n, OffsetCalculator<1 + sizeof...(In)> calc, F f, Out* out, const In*... in) {
  apply_strided(n, calc, f, out, std::index_sequence_for<In...>{}, in...);
}

// ---- launchers ------------------------------------------------------------------------------

template <typename T>
constexpr int64_t max_size_of() { return static_cast<int64_t>(sizeof(T)); }
template <typename T, typename U, typename... Rest>
constexpr int64_t max_size_of() {
  const int64_t rest = max_size_of<U, Rest...>();
  return static_cast<int64_t>(sizeof(T)) > rest ? static_cast<int64_t>(sizeof(T)) : rest;
}

// One launch over a piece that fits 32-bit indexing.
template <typename Out, typename... In, typename F, size_t... I>
void launch_piece(const StridedLoop& piece, const F& f, int device, cudaStream_t stream, std::index_sequence<I...>) {
  constexpr int kVec = vector_width(max_size_of<Out, In...>());
  const ElementSizes sizes{static_cast<int64_t>(sizeof(Out)), static_cast<int64_t>(sizeof(In))...};
  Out* out = reinterpret_cast<Out*>(piece.data[0]);
  if (choose_path(piece, sizes, kVec) == ElementwisePath::Vectorized) {
    const unsigned blocks =
        grid_stride_blocks(piece.numel / kVec, device, resident_blocks_per_sm(device) * kWavesPerSm);
    elementwise_vectorized<kVec, F, Out, In...><<<blocks, kBlockThreads, 0, stream>>>(
        piece.numel, f, out, reinterpret_cast<const In*>(piece.data[I + 1])...);
  } else {
    const auto calc = make_offset_calculator<1 + sizeof...(In)>(piece, sizes);
    const unsigned blocks = grid_dim(ceil_div(piece.numel, int64_t{kBlockThreads} * kStridedIlp));
    elementwise_strided<F, Out, In...><<<blocks, kBlockThreads, 0, stream>>>(
        static_cast<uint32_t>(piece.numel), calc, f, out, reinterpret_cast<const In*>(piece.data[I + 1])...);
  }
  KILN_CUDA_CHECK_LAUNCH();
}

// out = f(in...) over `loop` (operand 0 the output, of storage type Out; then the inputs
// of storage types In...) on `device`'s current stream. f takes opmath values.
template <typename Out, typename... In, typename F>
void run_elementwise(const StridedLoop& loop, int device, const F& f) {
  if (loop.numel == 0) return;
  KILN_ASSERT(loop.noperands == 1 + static_cast<int>(sizeof...(In)), "elementwise: operand count mismatch");
  const ElementSizes sizes{static_cast<int64_t>(sizeof(Out)), static_cast<int64_t>(sizeof(In))...};
  const OnDevice on(device);
  for (const StridedLoop& piece : split_for_32bit_indexing(loop, sizes))
    launch_piece<Out, In...>(piece, f, device, on.stream.handle(), std::index_sequence_for<In...>{});
}

// The launcher of op code kOp: out (T, or Bool for the table's bool_result codes) =
// f(in) / f(a, b), with the functor of kernels/elementwise_ops.h for opmath_t<T>.
template <UnaryOp kOp>
void launch_unary(const Tensor& in, const Tensor& out, const ElementwiseParams& params) {
  const StridedLoop loop = make_strided_loop({&out, &in});
  elementwise::visit_unary<kOp>(in.dtype(), params, [&]<typename Out, typename... In>(const auto& functor) {
    run_elementwise<Out, In...>(loop, out.device().index, functor);
  });
}

template <BinaryOp kOp>
void launch_binary(const Tensor& a, const Tensor& b, const Tensor& out, const ElementwiseParams& params) {
  const StridedLoop loop = make_strided_loop({&out, &a, &b});
  elementwise::visit_binary<kOp>(a.dtype(), params, [&]<typename Out, typename... In>(const auto& functor) {
    run_elementwise<Out, In...>(loop, out.device().index, functor);
  });
}

// The launcher tables of one family (elementwise_families.h): launch_unary<kOp> /
// launch_binary<kOp> for the family's codes, null for the others, which are therefore
// not instantiated in this file.
template <auto kOp, ElementwiseFamily kFamily>
constexpr auto launcher_if_in_family() {
  if constexpr (std::is_same_v<decltype(kOp), UnaryOp>) {
    if constexpr (family_of(kOp) == kFamily) return UnaryLauncher{&launch_unary<kOp>};
    else return UnaryLauncher{nullptr};
  } else {
    if constexpr (family_of(kOp) == kFamily) return BinaryLauncher{&launch_binary<kOp>};
    else return BinaryLauncher{nullptr};
  }
}

template <ElementwiseFamily kFamily, size_t... kCodes>
constexpr UnaryLaunchers unary_launchers(std::index_sequence<kCodes...>) {
  return {launcher_if_in_family<static_cast<UnaryOp>(kCodes), kFamily>()...};
}

template <ElementwiseFamily kFamily, size_t... kCodes>
constexpr BinaryLaunchers binary_launchers(std::index_sequence<kCodes...>) {
  return {launcher_if_in_family<static_cast<BinaryOp>(kCodes), kFamily>()...};
}

template <ElementwiseFamily kFamily>
constexpr UnaryLaunchers unary_launchers() {
  return unary_launchers<kFamily>(std::make_index_sequence<kNumUnaryOps>{});
}

template <ElementwiseFamily kFamily>
constexpr BinaryLaunchers binary_launchers() {
  return binary_launchers<kFamily>(std::make_index_sequence<kNumBinaryOps>{});
}

}  // namespace kiln::cuda
