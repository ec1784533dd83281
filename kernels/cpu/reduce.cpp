// CpuBackend reductions: sum, mean, amax/amin, norms, var_mean and argmax/argmin, all
// through one engine.
//
// What is reduced is a small op struct (SumOp, ExtremumOp, NormOp, WelfordOp, ArgOp),
// written once for both backends in kernels/reduce_ops.h:
//   Acc identity();                         the state of an empty reduction
//   Acc reduce(Acc, value, index);          folds in one element (index: its position
//                                           in the reduced index space, for argmax)
//   Acc combine(Acc, Acc);                  merges two partial states
//   void write(Acc, offset0, offset1);      stores the result(s) of one output
// How the loop runs is the engine's business (run_reduction), shared by every op:
//   1. Layout (make_layout, kernels/reduce_layout.h, shared with the CUDA planner). Dims
//      of size 1 are dropped; the rest split into kept dims (those of the output) and
//      reduced dims. Each group is sorted so that its smallest input stride is innermost,
//      and neighbours contiguous with each other are merged: a contiguous [N, C, H, W]
//      reduced over {H, W} becomes kept [N*C] x reduced [H*W].
//   2. Loop order (accumulate), picked by layout:
//      inner reduction: the innermost reduced dim has the smaller input stride, so each
//        output's elements lie along a (nearly) contiguous row: one accumulator per
//        output, folded along the row with kLanes independent lanes.
//      outer reduction: the innermost kept dim has the smaller stride (a sum over dim 0
//        of a row-major matrix): a tile of neighbouring outputs keeps a vector of
//        accumulators, and each reduced index adds one contiguous slice of a row to it.
//   3. Parallelism (run_reduction). With enough outputs, threads split the outputs, and
//      each output is reduced by one thread. With fewer outputs than threads and a long
//      reduction (a full sum), threads split the reduced range instead; their partial
//      states are merged with combine() in thread order, so a run is reproducible for a
//      given thread count.
//
// Note [Reduction accumulators]: sums of floating values (sum, mean, the norms, Welford's
// mean and M2) accumulate in double for every floating dtype, float16 to float64. On a
// CPU a double add costs what a float add costs, and double's 29 extra mantissa bits
// make the sum of 10^8 float32 values exact to float32 precision, with no pairwise or
// Kahan bookkeeping. Integer and bool sums accumulate in int64 and write int64 (the op
// layer allocates an int64 output). Max/min keep the input's opmath type, which is exact.
//
// NaN: max, min and the inf-norm propagate NaN (once NaN, always NaN), as PyTorch.
// argmax/argmin treat NaN as the extremum and return the index of the first one; ties
// otherwise go to the first index too (reduce_ops.h).
#include <omp.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <memory>
#include <type_traits>
#include <vector>

#include "core/dispatch.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/elementwise_engine.h"  // parallel_for, kGrain
#include "kernels/reduce_layout.h"
#include "kernels/reduce_ops.h"

namespace kiln::cpu {
namespace {

// ==== the ops: what is reduced (kernels/reduce_ops.h) =====================================

// Note [Reduction accumulators]: double for floating inputs, int64 for integers and bool.
template <typename T>
using SumAcc = std::conditional_t<is_floating_v<T>, double, int64_t>;

using reduce_ops::ArgOp;
using reduce_ops::ExtremumOp;
using reduce_ops::NormKind;
template <typename T, typename Out>
using SumOp = reduce_ops::SumOp<T, Out, SumAcc<T>>;
template <typename T, NormKind K>
using NormOp = reduce_ops::NormOp<T, K, double>;
template <typename T>
using WelfordOp = reduce_ops::WelfordOp<T, double>;

// ==== the layout: which elements meet which output ========================================

inline constexpr int kMaxRank = 64;

// The shared layout (kernels/reduce_layout.h); `reduce_dims` sorted; out0/out1 in keepdim
// form (out1 may be null).
using DimGroup = ReduceDims;

// The loops index the coalesced groups, so the limit is on those (size-1 dims dropped,
// contiguous neighbours merged), not on the input's rank.
ReduceLayout make_layout(const Tensor& in, IntList reduce_dims, const Tensor& out0,
                         const Tensor* out1) {
  ReduceLayout layout = make_reduce_layout(in.sizes(), in.strides(), out0.strides(),
                                           out1 ? out1->strides() : Dims{}, reduce_dims);
  KILN_CHECK(layout.kept.size() <= static_cast<size_t>(kMaxRank) && layout.reduced.size() <= static_cast<size_t>(kMaxRank),
             "reduce: at most ", kMaxRank, " non-mergeable dimensions are supported, got a tensor of ", in.sizes(),
             " with strides ", in.strides());
  return layout;
}

// Calls fn(offsets, first, count) for each run along the innermost dim of `group` that
// together make up its row-major indices [begin, end). `offsets` are the element offsets
// (input, output 0, output 1) of index `first`; the run steps by group.back().strides.
template <typename Fn>
void for_each_run(const DimGroup& group, int64_t begin, int64_t end, const Fn& fn) {
  if (begin >= end) return;
  const int nd = static_cast<int>(group.size());
  const int64_t inner = group.back().size;
  std::array<int64_t, kMaxRank> index;
  int64_t rest = begin / inner;
  for (int d = nd - 2; d >= 0; --d) {
    index[d] = rest % group[d].size;
    rest /= group[d].size;
  }
  int64_t position = begin % inner;
  int64_t first = begin;
  while (first < end) {
    std::array<int64_t, 3> offsets{};
    for (int k = 0; k < 3; ++k) {
      int64_t offset = position * group.back().strides[k];
      for (int d = 0; d < nd - 1; ++d) offset += index[d] * group[d].strides[k];
      offsets[k] = offset;
    }
    const int64_t count = std::min(inner - position, end - first);
    fn(offsets, first, count);
    first += count;
    position = 0;
    for (int d = nd - 2; d >= 0; --d) {
      if (++index[d] < group[d].size) break;
      index[d] = 0;
    }
  }
}

// ==== the engine: how the loop runs =======================================================

// Independent accumulators along a row: they break the chain of dependent adds (each add
// waits for the previous one otherwise), so the CPU overlaps them.
inline constexpr int kLanes = 4;
// Outputs whose accumulators one thread holds at a time (a few KiB: stays in L1).
inline constexpr int64_t kTile = 2048;
// Up to this many, they are on the stack.
inline constexpr int64_t kStackAccumulators = 32;

// Folds the `count` elements p[0], p[stride], ... (reduced indices first, first + 1, ...)
// into acc.
//
// Note [Not inlined for GCC 12]: GCC 12.2 with -O3 -march=native on an AVX-512 CPU
// (KILN_CPU_ARCH's default) miscompiles this loop where it is inlined into accumulate():
// sum(arange(360)) of int32 or int64 gave 28530 instead of 64620 (caught by
// Reduce.SumOfIntegersAndBoolGivesInt64). The same code is right at -O2, with
// -fno-tree-vectorize, under UBSan, and whenever it is not inlined, so the error is the
// vectorizer's, not undefined behaviour of ours; keeping the function out of line costs
// one call per run of reduced elements.
template <typename Op>
[[gnu::noinline]] typename Op::Acc reduce_run(const Op& op, typename Op::Acc acc, const typename Op::In* p, int64_t stride,
                            int64_t first, int64_t count) {
  using Acc = typename Op::Acc;
  using V = opmath_t<typename Op::In>;
  int64_t j = 0;
  if (count >= 4 * kLanes) {
    std::array<Acc, kLanes> lanes;
    lanes.fill(op.identity());
    for (; j + kLanes <= count; j += kLanes) {
      for (int l = 0; l < kLanes; ++l) lanes[l] = op.reduce(lanes[l], static_cast<V>(p[(j + l) * stride]), first + j + l);
    }
    for (const Acc& lane : lanes) acc = op.combine(acc, lane);
  }
  for (; j < count; ++j) acc = op.reduce(acc, static_cast<V>(p[j * stride]), first + j);
  return acc;
}

// Folds the reduced indices [rb, re) into the accumulators of outputs [kb, ke)
// (accs[0] belongs to output kb), in the layout's loop order.
template <typename Op>
void accumulate(const ReduceLayout& layout, const Op& op, const typename Op::In* in, int64_t kb, int64_t ke,
                int64_t rb, int64_t re, typename Op::Acc* accs) {
  using V = opmath_t<typename Op::In>;
  const int64_t kept_stride = layout.kept.back().strides[0];
  const int64_t reduced_stride = layout.reduced.back().strides[0];
  if (!layout.outer) {
    for_each_run(layout.kept, kb, ke, [&](const auto& kept_offsets, int64_t kept_first, int64_t kept_count) {
      for (int64_t c = 0; c < kept_count; ++c) {
        auto& acc = accs[kept_first - kb + c];
        const auto* base = in + kept_offsets[0] + c * kept_stride;
        for_each_run(layout.reduced, rb, re, [&](const auto& offsets, int64_t first, int64_t count) {
          acc = reduce_run(op, acc, base + offsets[0], reduced_stride, first, count);
        });
      }
    });
    return;
  }
  for_each_run(layout.reduced, rb, re, [&](const auto& reduced_offsets, int64_t reduced_first, int64_t reduced_count) {
    for (int64_t r = 0; r < reduced_count; ++r) {
      const auto* row = in + reduced_offsets[0] + r * reduced_stride;
      const int64_t index = reduced_first + r;
      for_each_run(layout.kept, kb, ke, [&](const auto& offsets, int64_t first, int64_t count) {
        auto* a = accs + (first - kb);
        const auto* p = row + offsets[0];
        if (kept_stride == 1) {  // the common case, spelled out so the compiler vectorizes it
          for (int64_t c = 0; c < count; ++c) a[c] = op.reduce(a[c], static_cast<V>(p[c]), index);
        } else {
          for (int64_t c = 0; c < count; ++c) a[c] = op.reduce(a[c], static_cast<V>(p[c * kept_stride]), index);
        }
      });
    }
  });
}

template <typename Op>
void write_outputs(const ReduceLayout& layout, const Op& op, int64_t kb, int64_t ke, const typename Op::Acc* accs) {
  const auto& inner_strides = layout.kept.back().strides;
  for_each_run(layout.kept, kb, ke, [&](const auto& offsets, int64_t first, int64_t count) {
    for (int64_t c = 0; c < count; ++c) {
      op.write(accs[first - kb + c], offsets[1] + c * inner_strides[1], offsets[2] + c * inner_strides[2]);
    }
  });
}

// Threads split the outputs; each thread works through its outputs a tile at a time.
template <typename Op>
void reduce_by_outputs(const ReduceLayout& layout, const Op& op, const typename Op::In* in) {
  const int64_t grain = std::max<int64_t>(1, kGrain / std::max<int64_t>(1, layout.reduced_numel));
  parallel_for(layout.kept_numel, grain, [&](int64_t begin, int64_t end) {
    // A few outputs' accumulators live on the stack (a heap block per call was a twentieth
    // of a small reduction's host cost); unique_ptr, not vector, for more: vector<bool>
    // (all/any's accumulator) has no data().
    using Acc = typename Op::Acc;
    const int64_t held = std::min(kTile, end - begin);
    std::array<Acc, kStackAccumulators> on_stack;
    std::unique_ptr<Acc[]> on_heap;
    Acc* accs = held <= kStackAccumulators ? on_stack.data() : (on_heap = std::make_unique<Acc[]>(held)).get();
    for (int64_t tile = begin; tile < end; tile += kTile) {
      const int64_t tile_end = std::min(end, tile + kTile);
      std::fill(accs, accs + (tile_end - tile), op.identity());
      accumulate(layout, op, in, tile, tile_end, 0, layout.reduced_numel, accs);
      write_outputs(layout, op, tile, tile_end, accs);
    }
  });
}

// Threads split the reduced range; partial states are merged in thread order.
template <typename Op>
void reduce_by_splitting(const ReduceLayout& layout, const Op& op, const typename Op::In* in, int64_t parts) {
  const int64_t outputs = layout.kept_numel;
  const int64_t chunk = (layout.reduced_numel + parts - 1) / parts;
  const auto partial = std::make_unique<typename Op::Acc[]>(parts * outputs);
  std::fill(partial.get(), partial.get() + parts * outputs, op.identity());
  parallel_for(parts, 1, [&](int64_t begin, int64_t end) {
    for (int64_t part = begin; part < end; ++part) {
      const int64_t rb = std::min(layout.reduced_numel, part * chunk);
      const int64_t re = std::min(layout.reduced_numel, rb + chunk);
      accumulate(layout, op, in, 0, outputs, rb, re, partial.get() + part * outputs);
    }
  });
  for (int64_t part = 1; part < parts; ++part) {
    for (int64_t k = 0; k < outputs; ++k) partial[k] = op.combine(partial[k], partial[part * outputs + k]);
  }
  write_outputs(layout, op, 0, outputs, partial.get());
}

template <typename Op>
void run_reduction(const ReduceLayout& layout, const Op& op, const typename Op::In* in) {
  if (layout.kept_numel == 0) return;
  const int64_t threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  const int64_t parts = std::min(threads, layout.reduced_numel / kGrain);
  if (layout.kept_numel < threads && parts > 1) {
    reduce_by_splitting(layout, op, in, parts);
  } else {
    reduce_by_outputs(layout, op, in);
  }
}

// ==== dispatch: an op struct per ReduceOp and dtype =======================================

template <typename T>
const T* input_data(const Tensor& in) {
  return static_cast<const T*>(in.data_ptr());
}

template <typename T>
T* output_data(const Tensor& out, const char* op) {
  KILN_ASSERT(out.dtype() == dtype_of_v<T>, op, ": output dtype ", out.dtype(), ", expected ", dtype_of_v<T>);
  return static_cast<T*>(out.data_ptr());
}

void sum_or_mean(const Tensor& in, const ReduceLayout& layout, const Tensor& out, bool mean) {
  const char* name = mean ? "mean" : "sum";
  auto run = [&]<typename T>() {
    using Out = std::conditional_t<is_floating_v<T>, T, int64_t>;
    SumOp<T, Out> op{output_data<Out>(out, name), static_cast<SumAcc<T>>(layout.reduced_numel), mean};
    run_reduction(layout, op, input_data<T>(in));
  };
  if (mean) {
    visit_dtype<kFloatingTypes>(in.dtype(), name, run);
  } else {
    visit_dtype<kAllTypes>(in.dtype(), name, run);
  }
}

template <bool kMax>
void extremum(const Tensor& in, const ReduceLayout& layout, const Tensor& out) {
  const char* name = kMax ? "amax" : "amin";
  visit_dtype<kAllTypes>(in.dtype(), name, [&]<typename T>() {
    run_reduction(layout, ExtremumOp<T, kMax>{output_data<T>(out, name)}, input_data<T>(in));
  });
}

void vector_norm(const Tensor& in, const ReduceLayout& layout, const Tensor& out, double p) {
  visit_dtype<kFloatingTypes>(in.dtype(), "norm", [&]<typename T>() {
    T* o = output_data<T>(out, "norm");
    const T* x = input_data<T>(in);
    if (std::isinf(p)) {
      run_reduction(layout, NormOp<T, NormKind::Inf>{o, p}, x);
    } else if (p == 1.0) {
      run_reduction(layout, NormOp<T, NormKind::One>{o, p}, x);
    } else if (p == 2.0) {
      run_reduction(layout, NormOp<T, NormKind::Two>{o, p}, x);
    } else {
      run_reduction(layout, NormOp<T, NormKind::P>{o, p}, x);
    }
  });
}

void check_cpu(const Tensor& in, const Tensor& out, const char* op) {
  KILN_ASSERT(in.device().is_cpu() && out.device().is_cpu(), op, " on ", in.device(), " -> ", out.device());
  KILN_ASSERT(in.dim() == out.dim(), op, ": output must be in keepdim form, got ", out.sizes(), " for input ",
              in.sizes());
}

}  // namespace

void CpuBackend::reduce(ReduceOp op, const Tensor& in, const Dims& reduce_dims, const Tensor& out,
                        const ReduceParams& params) {
  check_cpu(in, out, op_name(op));
  const ReduceLayout layout = make_layout(in, reduce_dims, out, nullptr);
  switch (op) {
    case ReduceOp::Sum: return sum_or_mean(in, layout, out, /*mean=*/false);
    case ReduceOp::Mean: return sum_or_mean(in, layout, out, /*mean=*/true);
    case ReduceOp::Max: return extremum<true>(in, layout, out);
    case ReduceOp::Min: return extremum<false>(in, layout, out);
    case ReduceOp::NormP: return vector_norm(in, layout, out, params.p);
    case ReduceOp::NormInf: return vector_norm(in, layout, out, std::numeric_limits<double>::infinity());
  }
}

void CpuBackend::var_mean(const Tensor& in, const Dims& reduce_dims, int64_t correction,
                          const Tensor& var_out, const Tensor& mean_out) {
  check_cpu(in, var_out, "var_mean");
  const ReduceLayout layout = make_layout(in, reduce_dims, var_out, &mean_out);
  visit_dtype<kFloatingTypes>(in.dtype(), "var_mean", [&]<typename T>() {
    WelfordOp<T> op{output_data<T>(var_out, "var_mean"), output_data<T>(mean_out, "var_mean"), correction};
    run_reduction(layout, op, input_data<T>(in));
  });
}

void CpuBackend::arg_reduce(ArgReduceOp op, const Tensor& in, int64_t dim, const Tensor& values_out,
                            const Tensor& indices_out) {
  const bool is_max = op == ArgReduceOp::ArgMax;
  const char* name = is_max ? "argmax" : "argmin";
  check_cpu(in, values_out, name);
  const ReduceLayout layout = make_layout(in, IntList(&dim, 1), values_out, &indices_out);
  visit_dtype<kAllTypes>(in.dtype(), name, [&]<typename T>() {
    T* values = output_data<T>(values_out, name);
    int64_t* indices = output_data<int64_t>(indices_out, name);
    if (is_max) {
      run_reduction(layout, ArgOp<T, true>{values, indices}, input_data<T>(in));
    } else {
      run_reduction(layout, ArgOp<T, false>{values, indices}, input_data<T>(in));
    }
  });
}

}  // namespace kiln::cpu
