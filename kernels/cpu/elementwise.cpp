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

// out (dtype T or Bool) = functor(in), with the functor built for opmath_t<T>.
template <DTypeSet kSet, typename MakeFunctor>
void run_unary(const Tensor& in, const Tensor& out, const char* name, const MakeFunctor& make) {
  const StridedLoop loop = make_strided_loop({&out, &in});
  visit_dtype<kSet>(in.dtype(), name, [&]<typename T>() {
    const auto functor = make.template operator()<opmath_t<T>>();
    using R = decltype(functor(opmath_t<T>{}));
    if constexpr (std::is_same_v<R, bool>) {
      elementwise_kernel<bool, T>(loop, functor);
    } else {
      elementwise_kernel<T, T>(loop, functor);
    }
  });
}

template <DTypeSet kSet, typename MakeFunctor>
void run_binary(const Tensor& a, const Tensor& b, const Tensor& out, const char* name, const MakeFunctor& make) {
  const StridedLoop loop = make_strided_loop({&out, &a, &b});
  visit_dtype<kSet>(a.dtype(), name, [&]<typename T>() {
    const auto functor = make.template operator()<opmath_t<T>>();
    using R = decltype(functor(opmath_t<T>{}, opmath_t<T>{}));
    if constexpr (std::is_same_v<R, bool>) {
      elementwise_kernel<bool, T, T>(loop, functor);
    } else {
      elementwise_kernel<T, T, T>(loop, functor);
    }
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
