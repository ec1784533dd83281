// CudaBackend reductions: the Backend entry points and make_launchable (reduce.h). The
// semantics are those of the CPU backend (kernels/cpu/reduce.cpp), op for op, because
// both run the same op structs (kernels/reduce_ops.h): identities of empty reductions,
// NaN propagation, first-index ties, output dtypes. Kernels overwrite their outputs.
#include "kernels/cuda/reduce.h"

#include <algorithm>
#include <cstdint>
#include <limits>

#include "core/tensor.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/offset_calculator.h"
#include "kernels/cuda/runtime.h"

namespace kiln::cuda {
namespace {

bool group_fits(const ReduceDims& group, int64_t numel) {
  return group.size() <= static_cast<size_t>(kMaxOffsetDims) && (group.size() == 1 || numel < (int64_t{1} << 31));
}

ReducePlan plan_for(const Tensor& in, IntList reduce_dims, const Tensor& out0,
                    const Tensor* out1) {
  ReduceProblem problem{in.sizes(), in.strides(), out0.strides(), out1 ? out1->strides() : Dims{},
                        Dims(reduce_dims), static_cast<int64_t>(itemsize(in.dtype())),
                        reinterpret_cast<uintptr_t>(in.data_ptr()) % 16 == 0,
                        device_properties(in.device().index).multiprocessors};
  return plan_reduction(problem);
}

}  // namespace

Launchable make_launchable(const Tensor& in, IntList reduce_dims, const Tensor& out0,
                           const Tensor* out1, const char* op) {
  KILN_ASSERT(in.device().is_cuda() && out0.device() == in.device() && (!out1 || out1->device() == in.device()), op,
              ": operands on ", in.device(), " and ", out0.device());
  KILN_ASSERT(in.dim() == out0.dim() && (!out1 || out1->dim() == in.dim()), op,
              ": outputs must be in keepdim form, got ", out0.sizes(), " for input ", in.sizes());
  Launchable l{in, out0, out1 ? *out1 : Tensor(), plan_for(in, reduce_dims, out0, out1)};
  if (l.plan.kept_numel == 0 ||
      (group_fits(l.plan.kept, l.plan.kept_numel) && group_fits(l.plan.reduced, l.plan.reduced_numel))) {
    return l;
  }
  std::vector<int64_t> order, reduced_last;
  for (int64_t d = 0; d < in.dim(); ++d) {
    const bool reduced = std::binary_search(reduce_dims.begin(), reduce_dims.end(), d);
    (reduced ? reduced_last : order).push_back(d);
  }
  std::vector<int64_t> new_reduce_dims;
  for (int64_t d : reduced_last) {
    new_reduce_dims.push_back(static_cast<int64_t>(order.size()));
    order.push_back(d);
  }
  l.in = in.permute(order).contiguous();
  l.out0 = out0.permute(order);
  if (out1) l.out1 = out1->permute(order);
  l.plan = plan_for(l.in, new_reduce_dims, l.out0, out1 ? &l.out1 : nullptr);
  KILN_CHECK(group_fits(l.plan.kept, l.plan.kept_numel) && group_fits(l.plan.reduced, l.plan.reduced_numel), op,
             ": the output's layout (sizes ", out0.sizes(), ", strides ", out0.strides(),
             ") is too scattered for a reduction of this size on CUDA; pass a contiguous output");
  return l;
}

// ==== Backend entry points ====================================================================

void CudaBackend::reduce(ReduceOp op, const Tensor& in, const Dims& reduce_dims, const Tensor& out,
                         const ReduceParams& params) {
  const Launchable l = make_launchable(in, reduce_dims, out, nullptr, op_name(op));
  switch (op) {
    case ReduceOp::Sum: return launch_sum_or_mean(l, /*mean=*/false);
    case ReduceOp::Mean: return launch_sum_or_mean(l, /*mean=*/true);
    case ReduceOp::Max: return launch_extremum(l, /*is_max=*/true);
    case ReduceOp::Min: return launch_extremum(l, /*is_max=*/false);
    case ReduceOp::NormP: return launch_vector_norm(l, params.p);
    case ReduceOp::NormInf: return launch_vector_norm(l, std::numeric_limits<double>::infinity());
  }
}

void CudaBackend::var_mean(const Tensor& in, const Dims& reduce_dims, int64_t correction,
                           const Tensor& var_out, const Tensor& mean_out) {
  launch_var_mean(make_launchable(in, reduce_dims, var_out, &mean_out, "var_mean"), correction);
}

void CudaBackend::arg_reduce(ArgReduceOp op, const Tensor& in, int64_t dim, const Tensor& values_out,
                             const Tensor& indices_out) {
  const bool is_max = op == ArgReduceOp::ArgMax;
  launch_arg_reduce(make_launchable(in, IntList(&dim, 1), values_out, &indices_out, is_max ? "argmax" : "argmin"), is_max);
}

}  // namespace kiln::cuda
