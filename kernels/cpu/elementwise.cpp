// CpuBackend's unary, binary and where: the op code picks its functor and dtypes
// (kernels/elementwise_ops.h over the op table, shared with CUDA), the dtype the C++ type,
// then the one elementwise engine runs (elementwise_engine.h).
#include "core/dispatch.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/elementwise_engine.h"
#include "kernels/elementwise_functors.h"
#include "kernels/elementwise_ops.h"

namespace kiln::cpu {

void CpuBackend::unary(UnaryOp op, const Tensor& in, const Tensor& out, const ElementwiseParams& p) {
  const StridedLoop loop = make_strided_loop({&out, &in});
  elementwise::with_op_code(op, [&]<UnaryOp kOp>() {
    elementwise::visit_unary<kOp>(in.dtype(), p, [&]<typename Out, typename... In>(const auto& functor) {
      elementwise_kernel<Out, In...>(loop, functor);
    });
  });
}

void CpuBackend::binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out,
                        const ElementwiseParams& p) {
  const StridedLoop loop = make_strided_loop({&out, &a, &b});
  elementwise::with_op_code(op, [&]<BinaryOp kOp>() {
    elementwise::visit_binary<kOp>(a.dtype(), p, [&]<typename Out, typename... In>(const auto& functor) {
      elementwise_kernel<Out, In...>(loop, functor);
    });
  });
}

void CpuBackend::where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) {
  const StridedLoop loop = make_strided_loop({&out, &cond, &a, &b});
  visit_dtype<kAllTypes>(a.dtype(), "where", [&]<typename T>() {
    elementwise_kernel<T, bool, T, T>(loop, functors::Where<opmath_t<T>>{});
  });
}

}  // namespace kiln::cpu
