// CpuBackend's unary, binary and where: pick the functor for the op code and the C++
// type for the dtype, then run the one elementwise engine (elementwise_engine.h).
#include <limits>

#include "core/dispatch.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/elementwise_engine.h"
#include "kernels/elementwise_functors.h"

namespace kiln::cpu {
namespace {

namespace f = functors;

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

// A functor with no parameters, for op code → functor tables.
template <template <typename> class F>
struct Plain {
  template <typename M>
  F<M> operator()() const { return F<M>{}; }
};

// Bounds of clamp in M: ±inf for floating M, saturated to M's range for integers.
template <typename M>
M clamp_bound(double v) {
  if constexpr (std::is_floating_point_v<M>) {
    return static_cast<M>(v);
  } else {
    if (v <= static_cast<double>(std::numeric_limits<M>::lowest())) return std::numeric_limits<M>::lowest();
    if (v >= static_cast<double>(std::numeric_limits<M>::max())) return std::numeric_limits<M>::max();
    return static_cast<M>(v);
  }
}

}  // namespace

void CpuBackend::unary(UnaryOp op, const Tensor& in, const Tensor& out, const ElementwiseParams& p) {
  const char* name = op_name(op);
  switch (op) {
    case UnaryOp::Neg: return run_unary<kNumericTypes>(in, out, name, Plain<f::Neg>{});
    case UnaryOp::Abs: return run_unary<kNumericTypes>(in, out, name, Plain<f::Abs>{});
    case UnaryOp::Sign: return run_unary<kNumericTypes>(in, out, name, Plain<f::Sign>{});
    case UnaryOp::Square: return run_unary<kNumericTypes>(in, out, name, Plain<f::Square>{});
    case UnaryOp::Sqrt: return run_unary<kFloatingTypes>(in, out, name, Plain<f::Sqrt>{});
    case UnaryOp::Rsqrt: return run_unary<kFloatingTypes>(in, out, name, Plain<f::Rsqrt>{});
    case UnaryOp::Exp: return run_unary<kFloatingTypes>(in, out, name, Plain<f::Exp>{});
    case UnaryOp::Log: return run_unary<kFloatingTypes>(in, out, name, Plain<f::Log>{});
    case UnaryOp::Reciprocal: return run_unary<kFloatingTypes>(in, out, name, Plain<f::Reciprocal>{});
    case UnaryOp::Sigmoid: return run_unary<kFloatingTypes>(in, out, name, Plain<f::Sigmoid>{});
    case UnaryOp::Tanh: return run_unary<kFloatingTypes>(in, out, name, Plain<f::Tanh>{});
    case UnaryOp::Relu: return run_unary<kNumericTypes>(in, out, name, Plain<f::Relu>{});
    case UnaryOp::Silu: return run_unary<kFloatingTypes>(in, out, name, Plain<f::Silu>{});
    case UnaryOp::Gelu: return run_unary<kFloatingTypes>(in, out, name, Plain<f::Gelu>{});
    case UnaryOp::GeluTanh: return run_unary<kFloatingTypes>(in, out, name, Plain<f::GeluTanh>{});
    case UnaryOp::Elu:
      return run_unary<kFloatingTypes>(in, out, name, [&]<typename M>() { return f::Elu<M>{M(p.alpha)}; });
    case UnaryOp::LeakyRelu:
      return run_unary<kFloatingTypes>(in, out, name, [&]<typename M>() { return f::LeakyRelu<M>{M(p.alpha)}; });
    case UnaryOp::Softplus:
      return run_unary<kFloatingTypes>(in, out, name,
                                       [&]<typename M>() { return f::Softplus<M>{M(p.alpha), M(p.beta)}; });
    case UnaryOp::Clamp:
      return run_unary<kNumericTypes>(in, out, name, [&]<typename M>() {
        return f::Clamp<M>{clamp_bound<M>(p.lower), clamp_bound<M>(p.upper)};
      });
    case UnaryOp::PowScalar:
      return run_unary<kNumericTypes>(in, out, name, [&]<typename M>() { return f::PowScalar<M>{M(p.beta)}; });
    case UnaryOp::LogicalNot: return run_unary<kAllTypes>(in, out, name, Plain<f::LogicalNot>{});
    case UnaryOp::IsNan: return run_unary<kAllTypes>(in, out, name, Plain<f::IsNan>{});
    case UnaryOp::IsInf: return run_unary<kAllTypes>(in, out, name, Plain<f::IsInf>{});
    case UnaryOp::IsFinite: return run_unary<kAllTypes>(in, out, name, Plain<f::IsFinite>{});
  }
  KILN_ASSERT(false, "unknown unary op ", static_cast<int>(op));
}

void CpuBackend::binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out,
                        const ElementwiseParams& p) {
  const char* name = op_name(op);
  switch (op) {
    case BinaryOp::Add:
      return run_binary<kNumericTypes>(a, b, out, name, [&]<typename M>() { return f::Add<M>{M(p.alpha)}; });
    case BinaryOp::Sub: return run_binary<kNumericTypes>(a, b, out, name, Plain<f::Sub>{});
    case BinaryOp::Mul: return run_binary<kNumericTypes>(a, b, out, name, Plain<f::Mul>{});
    case BinaryOp::Div: return run_binary<kFloatingTypes>(a, b, out, name, Plain<f::Div>{});
    case BinaryOp::Maximum: return run_binary<kNumericTypes>(a, b, out, name, Plain<f::Maximum>{});
    case BinaryOp::Minimum: return run_binary<kNumericTypes>(a, b, out, name, Plain<f::Minimum>{});
    case BinaryOp::Pow: return run_binary<kNumericTypes>(a, b, out, name, Plain<f::Pow>{});
    case BinaryOp::Eq: return run_binary<kAllTypes>(a, b, out, name, Plain<f::Eq>{});
    case BinaryOp::Ne: return run_binary<kAllTypes>(a, b, out, name, Plain<f::Ne>{});
    case BinaryOp::Lt: return run_binary<kAllTypes>(a, b, out, name, Plain<f::Lt>{});
    case BinaryOp::Le: return run_binary<kAllTypes>(a, b, out, name, Plain<f::Le>{});
    case BinaryOp::Gt: return run_binary<kAllTypes>(a, b, out, name, Plain<f::Gt>{});
    case BinaryOp::Ge: return run_binary<kAllTypes>(a, b, out, name, Plain<f::Ge>{});
    case BinaryOp::LogicalAnd: return run_binary<kAllTypes>(a, b, out, name, Plain<f::LogicalAnd>{});
    case BinaryOp::LogicalOr: return run_binary<kAllTypes>(a, b, out, name, Plain<f::LogicalOr>{});
    case BinaryOp::ReluBackward: return run_binary<kFloatingTypes>(a, b, out, name, Plain<f::ReluBackward>{});
    case BinaryOp::SigmoidBackward: return run_binary<kFloatingTypes>(a, b, out, name, Plain<f::SigmoidBackward>{});
    case BinaryOp::TanhBackward: return run_binary<kFloatingTypes>(a, b, out, name, Plain<f::TanhBackward>{});
    case BinaryOp::SiluBackward: return run_binary<kFloatingTypes>(a, b, out, name, Plain<f::SiluBackward>{});
    case BinaryOp::GeluBackward: return run_binary<kFloatingTypes>(a, b, out, name, Plain<f::GeluBackward>{});
    case BinaryOp::GeluTanhBackward:
      return run_binary<kFloatingTypes>(a, b, out, name, Plain<f::GeluTanhBackward>{});
    case BinaryOp::EluBackward:
      return run_binary<kFloatingTypes>(a, b, out, name, [&]<typename M>() { return f::EluBackward<M>{M(p.alpha)}; });
    case BinaryOp::LeakyReluBackward:
      return run_binary<kFloatingTypes>(a, b, out, name,
                                        [&]<typename M>() { return f::LeakyReluBackward<M>{M(p.alpha)}; });
    case BinaryOp::SoftplusBackward:
      return run_binary<kFloatingTypes>(a, b, out, name,
                                        [&]<typename M>() { return f::SoftplusBackward<M>{M(p.alpha), M(p.beta)}; });
    case BinaryOp::ClampBackward:
      return run_binary<kFloatingTypes>(a, b, out, name,
                                        [&]<typename M>() { return f::ClampBackward<M>{M(p.lower), M(p.upper)}; });
  }
  KILN_ASSERT(false, "unknown binary op ", static_cast<int>(op));
}

void CpuBackend::where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) {
  const StridedLoop loop = make_strided_loop({&out, &cond, &a, &b});
  visit_dtype<kAllTypes>(a.dtype(), "where", [&]<typename T>() {
    elementwise_kernel<T, bool, T, T>(loop, functors::Where<opmath_t<T>>{});
  });
}

}  // namespace kiln::cpu
