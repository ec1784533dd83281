// CUDA vector norms and var_mean: the op structs of kernels/reduce_ops.h run by the
// engine of reduce.cuh (one of the three reduction families, reduce.h). Sums in the
// input's opmath type (Note [Reduction accumulators] (CUDA) in reduce_sum.cu); Welford
// states merge by Chan's formula, an empty state (count 0) as the identity.
#include <cmath>

#include "core/dispatch.h"
#include "kernels/cuda/reduce.cuh"
#include "kernels/cuda/reduce.h"
#include "kernels/reduce_ops.h"

namespace kiln::cuda {

void launch_vector_norm(const Launchable& l, double p) {
  using reduce_ops::NormKind;
  using reduce_ops::NormOp;
  visit_dtype<kFloatingTypes>(l.in.dtype(), "norm", [&]<typename T>() {
    using Acc = opmath_t<T>;
    T* out = output_data<T>(l.out0, "norm");
    const T* x = input_data<T>(l);
    const int device = l.in.device().index;
    if (std::isinf(p)) {
      launch_reduction(NormOp<T, NormKind::Inf, Acc>{out, Acc(0)}, x, l.plan, device);
    } else if (p == 1.0) {
      launch_reduction(NormOp<T, NormKind::One, Acc>{out, Acc(1)}, x, l.plan, device);
    } else if (p == 2.0) {
      launch_reduction(NormOp<T, NormKind::Two, Acc>{out, Acc(2)}, x, l.plan, device);
    } else {
      launch_reduction(NormOp<T, NormKind::P, Acc>{out, static_cast<Acc>(p)}, x, l.plan, device);
    }
  });
}

void launch_var_mean(const Launchable& l, int64_t correction) {
  visit_dtype<kFloatingTypes>(l.in.dtype(), "var_mean", [&]<typename T>() {
    const reduce_ops::WelfordOp<T, opmath_t<T>> op{output_data<T>(l.out0, "var_mean"),
                                                   output_data<T>(l.out1, "var_mean"), correction};
    launch_reduction(op, input_data<T>(l), l.plan, l.in.device().index);
  });
}

}  // namespace kiln::cuda
