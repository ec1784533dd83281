// CUDA argmax and argmin (values and indices): ArgOp of kernels/reduce_ops.h run by the
// engine of reduce.cuh (one of the three reduction families, reduce.h). The first
// extremum wins, NaN counting as the extremum: a thread folds its elements in increasing
// index order, and every tree combine (shuffles, shared memory, the split's finalize)
// compares indices on equal values, so the answer is the CPU's whatever the launch shape.
#include "core/dispatch.h"
#include "kernels/cuda/reduce.cuh"
#include "kernels/cuda/reduce.h"
#include "kernels/reduce_ops.h"

namespace kiln::cuda {

void launch_arg_reduce(const Launchable& l, bool is_max) {
  const char* name = is_max ? "argmax" : "argmin";
  visit_dtype<kAllTypes>(l.in.dtype(), name, [&]<typename T>() {
    T* values = output_data<T>(l.out0, name);
    int64_t* indices = output_data<int64_t>(l.out1, name);
    const int device = l.in.device().index;
    if (is_max) {
      launch_reduction(reduce_ops::ArgOp<T, true>{values, indices}, input_data<T>(l), l.plan, device);
    } else {
      launch_reduction(reduce_ops::ArgOp<T, false>{values, indices}, input_data<T>(l), l.plan, device);
    }
  });
}

}  // namespace kiln::cuda
