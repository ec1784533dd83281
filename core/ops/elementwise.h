// Elementwise arithmetic, math functions, comparisons and where, with broadcasting and
// PyTorch's type promotion (Note [Type promotion] in core/dtype.h).
//
// Every op goes through one path (elementwise.cpp): promote, broadcast, allocate, then
// Backend::unary/binary/where. Integer inputs to floating-only functions (exp, sqrt,
// div ...) compute in float32, as PyTorch does. Backward formulas sit under each op in
// elementwise.cpp; at kinks the subgradient is documented there and pinned by tests.
#pragma once

#include <optional>

#include "core/backend.h"
#include "core/scalar.h"
#include "core/tensor.h"

namespace kiln {

// ---- arithmetic -------------------------------------------------------------------------
Tensor add(const Tensor& a, const Tensor& b, Scalar alpha = 1);  // a + alpha * b
Tensor add(const Tensor& a, Scalar b);
Tensor sub(const Tensor& a, const Tensor& b, Scalar alpha = 1);  // a - alpha * b
Tensor sub(const Tensor& a, Scalar b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, Scalar b);
Tensor div(const Tensor& a, const Tensor& b);  // true division: integers give float32
Tensor div(const Tensor& a, Scalar b);
Tensor neg(const Tensor& x);
Tensor pow(const Tensor& base, const Tensor& exponent);
Tensor pow(const Tensor& base, Scalar exponent);
Tensor maximum(const Tensor& a, const Tensor& b);  // ties split the gradient evenly
Tensor minimum(const Tensor& a, const Tensor& b);
// Either bound may be absent; integer tensors clamp in their own dtype.
Tensor clamp(const Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max);

// ---- math functions -----------------------------------------------------------------------
Tensor abs(const Tensor& x);   // subgradient 0 at 0
Tensor sign(const Tensor& x);  // gradient 0
Tensor square(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor rsqrt(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor reciprocal(const Tensor& x);

// ---- comparisons and logic (Bool results, not differentiable) ----------------------------
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, Scalar b);
Tensor ne(const Tensor& a, Scalar b);
Tensor lt(const Tensor& a, Scalar b);
Tensor le(const Tensor& a, Scalar b);
Tensor gt(const Tensor& a, Scalar b);
Tensor ge(const Tensor& a, Scalar b);
Tensor logical_and(const Tensor& a, const Tensor& b);
Tensor logical_or(const Tensor& a, const Tensor& b);
Tensor logical_not(const Tensor& x);
Tensor isnan(const Tensor& x);
Tensor isinf(const Tensor& x);
Tensor isfinite(const Tensor& x);

// cond ? a : b, all three broadcast together; a and b promote together.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor where(const Tensor& cond, const Tensor& a, Scalar b);

// ---- operators ------------------------------------------------------------------------------
inline Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
inline Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
inline Tensor operator+(const Tensor& a, Scalar b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, Scalar b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, Scalar b) { return mul(a, b); }
inline Tensor operator/(const Tensor& a, Scalar b) { return div(a, b); }
Tensor operator+(Scalar a, const Tensor& b);
Tensor operator-(Scalar a, const Tensor& b);
Tensor operator*(Scalar a, const Tensor& b);
Tensor operator/(Scalar a, const Tensor& b);
inline Tensor operator-(const Tensor& x) { return neg(x); }

// ---- the engine's entry points, for backward formulas and other ops (no autograd) -------
// Runs one functor over broadcast operands of the given compute dtype; the result has
// `out_dtype` (the compute dtype, or Bool for comparisons).
Tensor unary_kernel(UnaryOp op, const Tensor& x, const ElementwiseParams& params = {});
Tensor binary_kernel(BinaryOp op, const Tensor& a, const Tensor& b,
                     const ElementwiseParams& params = {});
// The 0-d tensor a C++ number becomes next to `like` (Note [Type promotion]).
Tensor wrap_scalar(Scalar value, const Tensor& like);

}  // namespace kiln
