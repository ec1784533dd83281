// CudaBackend::multi_tensor_norm: the p-norm of all elements of a list of tensors taken as
// one vector, (sum |x|^p)^(1/p), or max |x| for p = inf, into a [] tensor on the device
// (core/backend.h). clip_grad_norm_ computes its total norm with it, with no host sync.
//
// Two passes, deterministic (the same bits on every run: nothing depends on timing):
//   1. partial: a multi-tensor apply (multi_tensor_apply.cuh), one block per 64K-element
//      chunk; each thread folds its elements into an accumulator, the block combines its
//      threads in a fixed tree (warp shuffles, then the warps in order) and writes one
//      partial per block into a scratch buffer from the caching allocator, at the block's
//      number within the whole call (tensors of different dtypes are separate applies,
//      numbered one after the other).
//   2. finalize: one block combines the partials, each thread a fixed strided subset and
//      then the same fixed tree, and writes the p-th root (sqrt for p = 2) into `out`.
// Accumulators are `out`'s dtype: float32, or float64 when `out` is (every tensor float64);
// elements are read in their own dtype and widened. Sums for p = 1 (|x|), 2 (x^2) and
// other p (pow(|x|, p)); max |x| for inf, which lets a NaN through (as reduce_ops.h's
// NormKind::Inf). An empty list gives 0. Current stream, no host sync.
#include <array>
#include <cmath>
#include <map>
#include <vector>

#include "core/dispatch.h"
#include "core/kernel_memory.h"
#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/multi_tensor_apply.cuh"
#include "kernels/reduce_ops.h"  // NormKind

namespace kiln::cuda {
namespace {

using multi_tensor::Chunk;
using multi_tensor::for_each_lane_group;
using multi_tensor::kIlp;
using multi_tensor::kThreads;
using multi_tensor::load_lanes;
using multi_tensor::vector_aligned;
using reduce_ops::NormKind;

// How values fold into an accumulator of type A for one norm kind (a runtime value, the
// same for every thread, so the branches cost nothing).
template <typename A>
struct NormFold {
  NormKind kind;
  A p;

  __device__ __forceinline__ A combine(A a, A b) const {
    if (kind == NormKind::Inf) return (b != b || b > a) ? b : a;  // NaN propagates
    return a + b;
  }
  __device__ __forceinline__ A term(A x) const {
    switch (kind) {
      case NormKind::One: return std::fabs(x);
      case NormKind::Two: return x * x;
      case NormKind::P: return std::pow(std::fabs(x), p);
      case NormKind::Inf: return std::fabs(x);
    }
    return x;
  }
  __device__ __forceinline__ A root(A a) const {
    if (kind == NormKind::Two) return std::sqrt(a);
    if (kind == NormKind::P) return std::pow(a, A(1) / p);
    return a;
  }
};

// ==== kernels ===================================================================================

// List 0: the tensors. Block b writes its chunk's partial to partials[b].
template <typename T, typename A>
struct NormPartialFunctor {
  NormFold<A> fold;
  A* partials;

  __device__ void operator()(const Chunk<1>& c) const {
    const T* x = c.list<T>(0);
    A acc = A(0);
    for_each_lane_group(c.n, vector_aligned(x), [&](auto lanes) {
      A r[kIlp];
      load_lanes(r, x, lanes);  // masked lanes read as 0, which adds nothing
#pragma unroll
      for (int k = 0; k < kIlp; ++k) acc = fold.combine(acc, fold.term(r[k]));
    });
    acc = block_reduce(acc, [&](A a, A b) { return fold.combine(a, b); });
    if (threadIdx.x == 0) partials[c.block] = acc;
  }
};

// One block: out = root(combination of partials[0, count)).
template <typename A>
__global__ void __launch_bounds__(kThreads) norm_finalize(NormFold<A> fold, const A* partials, int64_t count, A* out) {
  A acc = A(0);
  for (int64_t i = threadIdx.x; i < count; i += blockDim.x) acc = fold.combine(acc, partials[i]);
  acc = block_reduce(acc, [&](A a, A b) { return fold.combine(a, b); });
  if (threadIdx.x == 0) *out = fold.root(acc);
}

// ==== launchers =================================================================================

NormKind norm_kind(double p) {
  if (std::isinf(p)) return NormKind::Inf;
  if (p == 1) return NormKind::One;
  if (p == 2) return NormKind::Two;
  return NormKind::P;
}

}  // namespace

void CudaBackend::multi_tensor_norm(const std::vector<Tensor>& tensors, double p, const Tensor& out) {
  KILN_ASSERT(out.defined() && out.numel() == 1 && (out.dtype() == DType::Float32 || out.dtype() == DType::Float64),
              "multi_tensor_norm: out must be a Float32 or Float64 scalar, got ", out.dtype(), " ", out.sizes());
  KILN_ASSERT(p > 0, "multi_tensor_norm: p = ", p);
  const int device = out.device().index;
  const OnDevice on(device);
  // Tensors grouped by dtype, list order kept within a group.
  std::map<DType, std::vector<Tensor>> groups;
  int64_t blocks = 0;
  for (const Tensor& t : tensors) {
    groups[t.dtype()].push_back(t);
    blocks += multi_tensor::chunks_of(t.numel());
  }
  visit_dtype<dtype_set(DType::Float32) | dtype_set(DType::Float64)>(out.dtype(), "multi_tensor_norm", [&]<typename A>() {
    const NormFold<A> fold{norm_kind(p), static_cast<A>(p)};
    // The partials, freed (stream-ordered) on return.
    const Tensor scratch = allocate_tensor({blocks}, out.dtype(), out.device());
    A* partials = static_cast<A*>(scratch.data_ptr());
    int64_t first_block = 0;
    for (const auto& [dtype, group] : groups) {
      const std::vector<Tensor>& list = group;
      visit_dtype<kFloatingTypes>(dtype, "multi_tensor_norm", [&]<typename T>() {
        first_block = multi_tensor::multi_tensor_apply<1>({&list}, NormPartialFunctor<T, A>{fold, partials}, on.stream.handle(),
                                                          first_block);
      });
    }
    KILN_ASSERT(first_block == blocks, "multi_tensor_norm: ", first_block, " partials of ", blocks);
    norm_finalize<A><<<1, kThreads, 0, on.stream.handle()>>>(fold, partials, blocks, static_cast<A*>(out.data_ptr()));
    KILN_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace kiln::cuda
