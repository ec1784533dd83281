// CpuBackend's unary, binary and where: the op code picks the functor and its dtypes
// (kernels/elementwise_ops.h, shared with CUDA), the dtype the C++ type, then the one
// elementwise engine runs (elementwise_engine.h).

#include "core/dispatch.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/elementwise_engine.h"
#include "kernels/elementwise_functors.h"
#include "kernels/elementwise_ops.h"

namespace kiln::cpu {
namespace {

// out (dtype T or Bool) = functor(in) / functor(a, b), with the functor built for
// opmath_t<T> (elementwise::visit_unary / visit_binary).
template <DTypeSet kSet, typename MakeFunctor>
void run_unary(const Tensor& in, const Tensor& out, const char* name, const MakeFunctor& make) {
  const StridedLoop loop = make_strided_loop({&out, &in});
  elementwise::visit_unary<kSet>(in.dtype(), name, make, [&]<typename Out, typename... In>(const auto& functor) {
    elementwise_kernel<Out, In...>(loop, functor);
  });
}

template <DTypeSet kSet, typename MakeFunctor>
void run_binary(const Tensor& a, const Tensor& b, const Tensor& out, const char* name, const MakeFunctor& make) {
  const StridedLoop loop = make_strided_loop({&out, &a, &b});
  elementwise::visit_binary<kSet>(a.dtype(), name, make, [&]<typename Out, typename... In>(const auto& functor) {
    elementwise_kernel<Out, In...>(loop, functor);
  });
}

}  // namespace

void CpuBackend::unary(UnaryOp op, const Tensor& in, const Tensor& out, const ElementwiseParams& p) {
  elementwise::dispatch_unary(op, p, [&]<DTypeSet kSet, UnaryOp>(const auto& make) {
    run_unary<kSet>(in, out, op_name(op), make);
  });
}

void CpuBackend::binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out,
                        const ElementwiseParams& p) {
  elementwise::dispatch_binary(op, p, [&]<DTypeSet kSet, BinaryOp>(const auto& make) {
    run_binary<kSet>(a, b, out, op_name(op), make);
  });
}

void CpuBackend::where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) {
  const StridedLoop loop = make_strided_loop({&out, &cond, &a, &b});
  visit_dtype<kAllTypes>(a.dtype(), "where", [&]<typename T>() {
    elementwise_kernel<T, bool, T, T>(loop, functors::Where<opmath_t<T>>{});
  });
}

}  // namespace kiln::cpu
