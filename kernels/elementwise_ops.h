// Op code -> functor: the one map both elementwise engines use.
//
// Everything about a code but its math is a row of the op table (core/op_table.h: name,
// dtypes, Bool result). This header adds the math: unary_functor<kOp, M>(params) /
// binary_functor<kOp, M>(params) build the code's functor (kernels/elementwise_functors.h)
// for opmath type M with its ElementwiseParams converted to M. A backend runs an op as
//
//   with_op_code(op, [&]<UnaryOp kOp>() {             // the runtime code as a constant
//     visit_unary<kOp>(in.dtype(), params, [&]<typename Out, typename In>(const auto& f) {
//       my_engine<Out, In>(loop, f);                  // out[i] = f(in[i])
//     });
//   });
//
// visit_unary / visit_binary pick the C++ storage type T for the dtype (only the dtypes of
// the code's row are instantiated; any other is the same kiln::Error on every backend),
// build the functor for opmath_t<T>, and call the engine with the storage types: Out is
// bool for the table's bool_result codes, else T. The CUDA backend compiles the codes in
// several files (kernels/cuda/elementwise_families.h) from the same map.
#pragma once

#include <limits>
#include <type_traits>
#include <utility>

#include "core/dispatch.h"
#include "core/op_table.h"
#include "kernels/elementwise_functors.h"

namespace kiln::elementwise {

// Calls visit.template operator()<kOp>() with kOp == op, for a code of any op enum with a
// kCount sentinel.
template <typename Code, typename Visit>
void with_op_code(Code op, Visit&& visit) {
  constexpr size_t kCount = static_cast<size_t>(Code::kCount);
  KILN_ASSERT(static_cast<size_t>(op) < kCount, "unknown op code ", static_cast<int>(op));
  [&]<size_t... kCodes>(std::index_sequence<kCodes...>) {
    (void)((op == static_cast<Code>(kCodes) && (visit.template operator()<static_cast<Code>(kCodes)>(), true)) ||
           ...);
  }(std::make_index_sequence<kCount>{});
}

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

template <auto kOp>
inline constexpr bool kNoFunctorFor = false;

template <UnaryOp kOp, typename M>
auto unary_functor(const ElementwiseParams& p) {
  namespace f = functors;
  using enum UnaryOp;
  if constexpr (kOp == Neg) return f::Neg<M>{};
  else if constexpr (kOp == Abs) return f::Abs<M>{};
  else if constexpr (kOp == Sign) return f::Sign<M>{};
  else if constexpr (kOp == Square) return f::Square<M>{};
  else if constexpr (kOp == Sqrt) return f::Sqrt<M>{};
  else if constexpr (kOp == Rsqrt) return f::Rsqrt<M>{};
  else if constexpr (kOp == Exp) return f::Exp<M>{};
  else if constexpr (kOp == Log) return f::Log<M>{};
  else if constexpr (kOp == Reciprocal) return f::Reciprocal<M>{};
  else if constexpr (kOp == Sigmoid) return f::Sigmoid<M>{};
  else if constexpr (kOp == Tanh) return f::Tanh<M>{};
  else if constexpr (kOp == Relu) return f::Relu<M>{};
  else if constexpr (kOp == Silu) return f::Silu<M>{};
  else if constexpr (kOp == Gelu) return f::Gelu<M>{};
  else if constexpr (kOp == GeluTanh) return f::GeluTanh<M>{};
  else if constexpr (kOp == Elu) return f::Elu<M>{M(p.alpha)};
  else if constexpr (kOp == LeakyRelu) return f::LeakyRelu<M>{M(p.alpha)};
  else if constexpr (kOp == Softplus) return f::Softplus<M>{M(p.alpha), M(p.beta)};
  else if constexpr (kOp == Clamp) return f::Clamp<M>{clamp_bound<M>(p.lower), clamp_bound<M>(p.upper)};
  else if constexpr (kOp == PowScalar) return f::PowScalar<M>{M(p.beta)};
  else if constexpr (kOp == LogicalNot) return f::LogicalNot<M>{};
  else if constexpr (kOp == IsNan) return f::IsNan<M>{};
  else if constexpr (kOp == IsInf) return f::IsInf<M>{};
  else if constexpr (kOp == IsFinite) return f::IsFinite<M>{};
  else static_assert(kNoFunctorFor<kOp>, "a UnaryOp code without a functor: add it here");
}

template <BinaryOp kOp, typename M>
auto binary_functor(const ElementwiseParams& p) {
  namespace f = functors;
  using enum BinaryOp;
  if constexpr (kOp == Add) return f::Add<M>{M(p.alpha)};
  else if constexpr (kOp == Sub) return f::Sub<M>{};
  else if constexpr (kOp == Mul) return f::Mul<M>{};
  else if constexpr (kOp == Div) return f::Div<M>{};
  else if constexpr (kOp == Maximum) return f::Maximum<M>{};
  else if constexpr (kOp == Minimum) return f::Minimum<M>{};
  else if constexpr (kOp == Pow) return f::Pow<M>{};
  else if constexpr (kOp == Eq) return f::Eq<M>{};
  else if constexpr (kOp == Ne) return f::Ne<M>{};
  else if constexpr (kOp == Lt) return f::Lt<M>{};
  else if constexpr (kOp == Le) return f::Le<M>{};
  else if constexpr (kOp == Gt) return f::Gt<M>{};
  else if constexpr (kOp == Ge) return f::Ge<M>{};
  else if constexpr (kOp == LogicalAnd) return f::LogicalAnd<M>{};
  else if constexpr (kOp == LogicalOr) return f::LogicalOr<M>{};
  else if constexpr (kOp == ReluBackward) return f::ReluBackward<M>{};
  else if constexpr (kOp == SigmoidBackward) return f::SigmoidBackward<M>{};
  else if constexpr (kOp == TanhBackward) return f::TanhBackward<M>{};
  else if constexpr (kOp == SiluBackward) return f::SiluBackward<M>{};
  else if constexpr (kOp == GeluBackward) return f::GeluBackward<M>{};
  else if constexpr (kOp == GeluTanhBackward) return f::GeluTanhBackward<M>{};
  else if constexpr (kOp == EluBackward) return f::EluBackward<M>{M(p.alpha)};
  else if constexpr (kOp == LeakyReluBackward) return f::LeakyReluBackward<M>{M(p.alpha)};
  else if constexpr (kOp == SoftplusBackward) return f::SoftplusBackward<M>{M(p.alpha), M(p.beta)};
  else if constexpr (kOp == ClampBackward) return f::ClampBackward<M>{M(p.lower), M(p.upper)};
  else static_assert(kNoFunctorFor<kOp>, "a BinaryOp code without a functor: add it here");
}

// The storage types of code kOp on `dtype`: calls run.template operator()<Out, T>(functor)
// with the functor built for opmath_t<T>, Out = bool for bool_result codes, else T.
template <UnaryOp kOp, typename Run>
void visit_unary(DType dtype, const ElementwiseParams& params, const Run& run) {
  constexpr bool kBoolResult = op_info(kOp).bool_result;
  visit_dtype<op_info(kOp).dtypes>(dtype, op_name(kOp), [&]<typename T>() {
    const auto functor = unary_functor<kOp, opmath_t<T>>(params);
    static_assert(std::is_same_v<decltype(functor(opmath_t<T>{})), bool> == kBoolResult,
                  "the functor's result type disagrees with the op table's bool_result");
    run.template operator()<std::conditional_t<kBoolResult, bool, T>, T>(functor);
  });
}

// As visit_unary, calling run.template operator()<Out, T, T>(functor).
template <BinaryOp kOp, typename Run>
void visit_binary(DType dtype, const ElementwiseParams& params, const Run& run) {
  constexpr bool kBoolResult = op_info(kOp).bool_result;
  visit_dtype<op_info(kOp).dtypes>(dtype, op_name(kOp), [&]<typename T>() {
    const auto functor = binary_functor<kOp, opmath_t<T>>(params);
    static_assert(std::is_same_v<decltype(functor(opmath_t<T>{}, opmath_t<T>{})), bool> == kBoolResult,
                  "the functor's result type disagrees with the op table's bool_result");
    run.template operator()<std::conditional_t<kBoolResult, bool, T>, T, T>(functor);
  });
}

}  // namespace kiln::elementwise
