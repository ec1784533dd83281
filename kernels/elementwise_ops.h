// Op code -> functor -> supported dtypes: the one table both elementwise engines use.
//
// dispatch_unary / dispatch_binary switch on the op code and call
//
//   visit.template operator()<kSet, kOp>(make)
//
// where kSet is the DTypeSet the op supports (anything else is the same kiln::Error on
// every backend, from visit_dtype), kOp the op code as a compile-time constant, and
// `make` a functor maker: `make.template operator()<M>()` builds the op's functor for
// opmath type M with its parameters (ElementwiseParams) converted to M. A backend's
// visitor picks the C++ type for the dtype and runs its engine. kOp lets a visitor
// instantiate only some ops (`if constexpr`), so that the CUDA backend can compile the
// table's families in separate files (unary.cu, unary_math.cu, binary.cu, ...) while the
// mapping itself is written once, here.
#pragma once

#include <limits>
#include <type_traits>

#include "core/backend.h"
#include "core/dispatch.h"
#include "kernels/elementwise_functors.h"

namespace kiln::elementwise {

// A functor with no parameters.
template <template <typename> class F>
struct Plain {
  template <typename M>
  F<M> operator()() const { return F<M>{}; }
};

// Bounds of clamp in M: +-inf for floating M, saturated to M's range for integers.
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

// Ops whose result is Bool whatever the input dtype.
constexpr bool returns_bool(UnaryOp op) {
  return op == UnaryOp::LogicalNot || op == UnaryOp::IsNan || op == UnaryOp::IsInf || op == UnaryOp::IsFinite;
}
constexpr bool returns_bool(BinaryOp op) {
  return op >= BinaryOp::Eq && op <= BinaryOp::LogicalOr;
}
// Backward functors f(grad_out, saved).
constexpr bool is_backward(BinaryOp op) { return op >= BinaryOp::ReluBackward; }

// The storage types of an op on dtype `dtype` (an element of kSet): the functor from
// `make` for opmath_t<T>, and Out = Bool when it returns bool (predicates, comparisons),
// else T. Calls run.template operator()<Out, T>(functor) (visit_unary) or
// <Out, T, T>(functor) (visit_binary); each engine's run_unary / run_binary is this plus
// its own loop.
template <DTypeSet kSet, typename MakeFunctor, typename Run>
void visit_unary(DType dtype, const char* name, const MakeFunctor& make, const Run& run) {
  visit_dtype<kSet>(dtype, name, [&]<typename T>() {
    const auto functor = make.template operator()<opmath_t<T>>();
    using R = decltype(functor(opmath_t<T>{}));
    run.template operator()<std::conditional_t<std::is_same_v<R, bool>, bool, T>, T>(functor);
  });
}

template <DTypeSet kSet, typename MakeFunctor, typename Run>
void visit_binary(DType dtype, const char* name, const MakeFunctor& make, const Run& run) {
  visit_dtype<kSet>(dtype, name, [&]<typename T>() {
    const auto functor = make.template operator()<opmath_t<T>>();
    using R = decltype(functor(opmath_t<T>{}, opmath_t<T>{}));
    run.template operator()<std::conditional_t<std::is_same_v<R, bool>, bool, T>, T, T>(functor);
  });
}

template <typename Visit>
void dispatch_unary(UnaryOp op, const ElementwiseParams& p, Visit&& visit) {
  namespace f = functors;
  using U = UnaryOp;
  switch (op) {
    case U::Neg: return visit.template operator()<kNumericTypes, U::Neg>(Plain<f::Neg>{});
    case U::Abs: return visit.template operator()<kNumericTypes, U::Abs>(Plain<f::Abs>{});
    case U::Sign: return visit.template operator()<kNumericTypes, U::Sign>(Plain<f::Sign>{});
    case U::Square: return visit.template operator()<kNumericTypes, U::Square>(Plain<f::Square>{});
    case U::Sqrt: return visit.template operator()<kFloatingTypes, U::Sqrt>(Plain<f::Sqrt>{});
    case U::Rsqrt: return visit.template operator()<kFloatingTypes, U::Rsqrt>(Plain<f::Rsqrt>{});
    case U::Exp: return visit.template operator()<kFloatingTypes, U::Exp>(Plain<f::Exp>{});
    case U::Log: return visit.template operator()<kFloatingTypes, U::Log>(Plain<f::Log>{});
    case U::Reciprocal: return visit.template operator()<kFloatingTypes, U::Reciprocal>(Plain<f::Reciprocal>{});
    case U::Sigmoid: return visit.template operator()<kFloatingTypes, U::Sigmoid>(Plain<f::Sigmoid>{});
    case U::Tanh: return visit.template operator()<kFloatingTypes, U::Tanh>(Plain<f::Tanh>{});
    case U::Relu: return visit.template operator()<kNumericTypes, U::Relu>(Plain<f::Relu>{});
    case U::Silu: return visit.template operator()<kFloatingTypes, U::Silu>(Plain<f::Silu>{});
    case U::Gelu: return visit.template operator()<kFloatingTypes, U::Gelu>(Plain<f::Gelu>{});
    case U::GeluTanh: return visit.template operator()<kFloatingTypes, U::GeluTanh>(Plain<f::GeluTanh>{});
    case U::Elu:
      return visit.template operator()<kFloatingTypes, U::Elu>([&]<typename M>() { return f::Elu<M>{M(p.alpha)}; });
    case U::LeakyRelu:
      return visit.template operator()<kFloatingTypes, U::LeakyRelu>(
          [&]<typename M>() { return f::LeakyRelu<M>{M(p.alpha)}; });
    case U::Softplus:
      return visit.template operator()<kFloatingTypes, U::Softplus>(
          [&]<typename M>() { return f::Softplus<M>{M(p.alpha), M(p.beta)}; });
    case U::Clamp:
      return visit.template operator()<kNumericTypes, U::Clamp>(
          [&]<typename M>() { return f::Clamp<M>{clamp_bound<M>(p.lower), clamp_bound<M>(p.upper)}; });
    case U::PowScalar:
      return visit.template operator()<kNumericTypes, U::PowScalar>(
          [&]<typename M>() { return f::PowScalar<M>{M(p.beta)}; });
    case U::LogicalNot: return visit.template operator()<kAllTypes, U::LogicalNot>(Plain<f::LogicalNot>{});
    case U::IsNan: return visit.template operator()<kAllTypes, U::IsNan>(Plain<f::IsNan>{});
    case U::IsInf: return visit.template operator()<kAllTypes, U::IsInf>(Plain<f::IsInf>{});
    case U::IsFinite: return visit.template operator()<kAllTypes, U::IsFinite>(Plain<f::IsFinite>{});
  }
  KILN_ASSERT(false, "unknown unary op ", static_cast<int>(op));
}

template <typename Visit>
void dispatch_binary(BinaryOp op, const ElementwiseParams& p, Visit&& visit) {
  namespace f = functors;
  using B = BinaryOp;
  switch (op) {
    case B::Add:
      return visit.template operator()<kNumericTypes, B::Add>([&]<typename M>() { return f::Add<M>{M(p.alpha)}; });
    case B::Sub: return visit.template operator()<kNumericTypes, B::Sub>(Plain<f::Sub>{});
    case B::Mul: return visit.template operator()<kNumericTypes, B::Mul>(Plain<f::Mul>{});
    case B::Div: return visit.template operator()<kFloatingTypes, B::Div>(Plain<f::Div>{});
    case B::Maximum: return visit.template operator()<kNumericTypes, B::Maximum>(Plain<f::Maximum>{});
    case B::Minimum: return visit.template operator()<kNumericTypes, B::Minimum>(Plain<f::Minimum>{});
    case B::Pow: return visit.template operator()<kNumericTypes, B::Pow>(Plain<f::Pow>{});
    case B::Eq: return visit.template operator()<kAllTypes, B::Eq>(Plain<f::Eq>{});
    case B::Ne: return visit.template operator()<kAllTypes, B::Ne>(Plain<f::Ne>{});
    case B::Lt: return visit.template operator()<kAllTypes, B::Lt>(Plain<f::Lt>{});
    case B::Le: return visit.template operator()<kAllTypes, B::Le>(Plain<f::Le>{});
    case B::Gt: return visit.template operator()<kAllTypes, B::Gt>(Plain<f::Gt>{});
    case B::Ge: return visit.template operator()<kAllTypes, B::Ge>(Plain<f::Ge>{});
    case B::LogicalAnd: return visit.template operator()<kAllTypes, B::LogicalAnd>(Plain<f::LogicalAnd>{});
    case B::LogicalOr: return visit.template operator()<kAllTypes, B::LogicalOr>(Plain<f::LogicalOr>{});
    case B::ReluBackward:
      return visit.template operator()<kFloatingTypes, B::ReluBackward>(Plain<f::ReluBackward>{});
    case B::SigmoidBackward:
      return visit.template operator()<kFloatingTypes, B::SigmoidBackward>(Plain<f::SigmoidBackward>{});
    case B::TanhBackward:
      return visit.template operator()<kFloatingTypes, B::TanhBackward>(Plain<f::TanhBackward>{});
    case B::SiluBackward:
      return visit.template operator()<kFloatingTypes, B::SiluBackward>(Plain<f::SiluBackward>{});
    case B::GeluBackward:
      return visit.template operator()<kFloatingTypes, B::GeluBackward>(Plain<f::GeluBackward>{});
    case B::GeluTanhBackward:
      return visit.template operator()<kFloatingTypes, B::GeluTanhBackward>(Plain<f::GeluTanhBackward>{});
    case B::EluBackward:
      return visit.template operator()<kFloatingTypes, B::EluBackward>(
          [&]<typename M>() { return f::EluBackward<M>{M(p.alpha)}; });
    case B::LeakyReluBackward:
      return visit.template operator()<kFloatingTypes, B::LeakyReluBackward>(
          [&]<typename M>() { return f::LeakyReluBackward<M>{M(p.alpha)}; });
    case B::SoftplusBackward:
      return visit.template operator()<kFloatingTypes, B::SoftplusBackward>(
          [&]<typename M>() { return f::SoftplusBackward<M>{M(p.alpha), M(p.beta)}; });
    case B::ClampBackward:
      return visit.template operator()<kFloatingTypes, B::ClampBackward>(
          [&]<typename M>() { return f::ClampBackward<M>{M(p.lower), M(p.upper)}; });
  }
  KILN_ASSERT(false, "unknown binary op ", static_cast<int>(op));
}

}  // namespace kiln::elementwise
