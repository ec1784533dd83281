// CUDA sum, mean, amax and amin: the op structs of kernels/reduce_ops.h run by the
// engine of reduce.cuh (one of the three reduction families, reduce.h).
//
// Note [Reduction accumulators] (CUDA): sums (sum, mean, the norms, Welford's mean and
// M2) accumulate in float for float32, float16 and bfloat16 and in double for float64.
// The CPU sums in double, but on a GPU double adds run at 1/2 to 1/64 of float speed and
// doubles would double the registers of every state; float is enough because the GPU's
// sums are naturally blocked: each thread folds a few hundred elements at most, then
// partial sums meet in a tree (shuffles, shared memory, the split's workspace), so the
// rounding error grows like log(n) rather than n. Integer and bool sums accumulate in
// int64 and write int64 (exact). Max/min keep the input's opmath type (exact). The parity
// tests compare with a tolerance that scales with sqrt(n) (tests/cuda/test_cuda_reduce.cpp).
//
// Instantiations: one SumOp per dtype serves both sum and mean (`is_mean` is a runtime
// flag), so mean adds no kernels.
#include <type_traits>

#include "core/dispatch.h"
#include "kernels/cuda/reduce.cuh"
#include "kernels/cuda/reduce.h"
#include "kernels/reduce_ops.h"

namespace kiln::cuda {

void launch_sum_or_mean(const Launchable& l, bool mean) {
  const char* name = mean ? "mean" : "sum";
  auto run = [&]<typename T>() {
    using Out = std::conditional_t<is_floating_v<T>, T, int64_t>;
    using Acc = ReduceSumAcc<T>;
    const reduce_ops::SumOp<T, Out, Acc> op{output_data<Out>(l.out0, name), static_cast<Acc>(l.plan.reduced_numel),
                                            mean};
    launch_reduction(op, input_data<T>(l), l.plan, l.in.device().index);
  };
  if (mean) {
    visit_dtype<kFloatingTypes>(l.in.dtype(), name, run);
  } else {
    visit_dtype<kAllTypes>(l.in.dtype(), name, run);
  }
}

void launch_extremum(const Launchable& l, bool is_max) {
  const char* name = is_max ? "amax" : "amin";
  visit_dtype<kAllTypes>(l.in.dtype(), name, [&]<typename T>() {
    T* out = output_data<T>(l.out0, name);
    const int device = l.in.device().index;
    if (is_max) {
      launch_reduction(reduce_ops::ExtremumOp<T, true>{out}, input_data<T>(l), l.plan, device);
    } else {
      launch_reduction(reduce_ops::ExtremumOp<T, false>{out}, input_data<T>(l), l.plan, device);
    }
  });
}

}  // namespace kiln::cuda
