// CudaBackend reductions, host side: the operands of one reduction made launchable, and
// the launchers of the op families, one .cu file each so that they compile in parallel
// (nvcc spends minutes on the engine's instantiations):
//   reduce_sum.cu    sum, mean, amax, amin
//   reduce_norm.cu   vector norms, var_mean (Welford)
//   reduce_arg.cu    argmax, argmin
// reduce.cpp holds the Backend entry points, which pick a launcher. The op structs are
// kernels/reduce_ops.h (shared with the CPU backend), the engine is reduce.cuh.
#pragma once

#include <cstdint>
#include <vector>

#include "core/error.h"
#include "core/tensor.h"
#include "kernels/cuda/reduce_plan.h"

namespace kiln::cuda {

// The operands of one reduction, made launchable (Note [Reduction indexing] in
// reduce.cuh): when a group of dims is too large or too scattered for 32-bit division,
// the input is copied with the kept dims first and the reduced dims last, contiguous, so
// each group coalesces into one dim; the outputs are permuted alike (views, written in
// place).
struct Launchable {
  Tensor in, out0, out1;
  ReducePlan plan;
};

Launchable make_launchable(const Tensor& in, IntList reduce_dims, const Tensor& out0,
                           const Tensor* out1, const char* op);

template <typename T>
const T* input_data(const Launchable& l) {
  return static_cast<const T*>(l.in.data_ptr());
}

template <typename T>
T* output_data(const Tensor& out, const char* op) {
  KILN_ASSERT(out.dtype() == dtype_of_v<T>, op, ": output dtype ", out.dtype(), ", expected ", dtype_of_v<T>);
  return static_cast<T*>(out.data_ptr());
}

// reduce_sum.cu
void launch_sum_or_mean(const Launchable& l, bool mean);
void launch_extremum(const Launchable& l, bool is_max);
// reduce_norm.cu
void launch_vector_norm(const Launchable& l, double p);
void launch_var_mean(const Launchable& l, int64_t correction);
// reduce_arg.cu
void launch_arg_reduce(const Launchable& l, bool is_max);

}  // namespace kiln::cuda
