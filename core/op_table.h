// The elementwise op codes and the one table that describes them.
//
// A UnaryOp or BinaryOp code names one functor of the elementwise engines (Backend::unary
// and Backend::binary in core/backend.h; the functors are kernels/elementwise_functors.h).
// Everything else anyone needs to know about a code is one row of kUnaryOps / kBinaryOps
// below, and everything derives from those rows:
//   name         op_name(op), in every error message ("leaky_relu: unsupported dtype Bool")
//   dtypes       the input dtypes a backend computes it in (any other input is the same
//                kiln::Error on every backend)
//   bool_result  the output is Bool whatever the input dtype (predicates, comparisons)
//   integer_inputs (unary, floating-only codes) what the op layer does with an integer or
//                Bool input: computes it in float32, or refuses it (Note [Integer inputs])
//   is_backward  a fused backward functor f(grad_out, saved) = grad_in (binary only)
// The backends, the op layer and the parity tests loop over codes 0 .. kNumUnaryOps - 1
// (or kNumBinaryOps - 1), so a new code is tested everywhere without editing a list.
// Adding an op: docs/architecture.md, "Adding an elementwise op".
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>

#include "core/dispatch.h"

namespace kiln {

enum class UnaryOp : uint8_t {
  Neg, Abs, Sign, Square, Sqrt, Rsqrt, Exp, Log, Reciprocal, Sigmoid, Tanh, Relu, Silu, Gelu,
  GeluTanh, Elu, LeakyRelu, Softplus, Clamp, PowScalar, LogicalNot, IsNan, IsInf, IsFinite,
  kCount,  // sentinel: the number of codes, never an op
};

enum class BinaryOp : uint8_t {
  Add, Sub, Mul, Div, Maximum, Minimum, Pow, Eq, Ne, Lt, Le, Gt, Ge, LogicalAnd, LogicalOr,
  ReluBackward, SigmoidBackward, TanhBackward, SiluBackward, GeluBackward, GeluTanhBackward,
  EluBackward, LeakyReluBackward, SoftplusBackward, ClampBackward,
  kCount,  // sentinel: the number of codes, never an op
};

inline constexpr int kNumUnaryOps = static_cast<int>(UnaryOp::kCount);
inline constexpr int kNumBinaryOps = static_cast<int>(BinaryOp::kCount);

// Scalar parameters of the parameterised functors; the table's comments say who reads what.
struct ElementwiseParams {
  double alpha = 1.0;  // Add/Sub: scale of b; Elu: alpha; LeakyRelu: slope; Softplus: beta
  double beta = 0.0;   // Softplus: threshold; PowScalar: exponent
  double lower = 0.0;  // Clamp: lower bound (-inf when absent)
  double upper = 0.0;  // Clamp: upper bound (+inf when absent)
};

// Note [Integer inputs]: what the op layer does with an integer or Bool input of a code
// whose dtypes are the floating types only. PyTorch has two kinds of such functions, and
// so do we: its "unary float" ops (exp, sqrt, sigmoid, tanh) and true division compute
// them in float32 (torch.sigmoid(int tensor) is float32), while the activations whose
// kernels it dispatches on floating types only (gelu, silu, elu, leaky_relu, softplus)
// refuse them ("not implemented for 'Long'"). Codes that compute integers themselves
// (relu, abs, add) keep the input's dtype. compute_dtype() and refuses_integers() below
// are the rule; core/ops/elementwise.cpp applies it.
enum class IntegerInputs : uint8_t {
  ToFloat32,  // computed in float32 (kDefaultFloat)
  Refused,    // a kiln::Error naming the op
};

struct UnaryOpInfo {
  UnaryOp op;        // the code this row describes (row i describes code i)
  const char* name;
  DTypeSet dtypes;
  bool bool_result;
  IntegerInputs integer_inputs = IntegerInputs::ToFloat32;  // read for floating-only codes
};

struct BinaryOpInfo {
  BinaryOp op;
  const char* name;
  DTypeSet dtypes;
  bool bool_result;
  bool is_backward;  // f(grad_out, saved): `saved` is the forward's input or output, below
};

inline constexpr UnaryOpInfo kUnaryOps[] = {
    {UnaryOp::Neg, "neg", kNumericTypes, false},
    {UnaryOp::Abs, "abs", kNumericTypes, false},
    {UnaryOp::Sign, "sign", kNumericTypes, false},
    {UnaryOp::Square, "square", kNumericTypes, false},
    {UnaryOp::Sqrt, "sqrt", kFloatingTypes, false},
    {UnaryOp::Rsqrt, "rsqrt", kFloatingTypes, false},
    {UnaryOp::Exp, "exp", kFloatingTypes, false},
    {UnaryOp::Log, "log", kFloatingTypes, false},
    {UnaryOp::Reciprocal, "reciprocal", kFloatingTypes, false},
    {UnaryOp::Sigmoid, "sigmoid", kFloatingTypes, false},
    {UnaryOp::Tanh, "tanh", kFloatingTypes, false},
    {UnaryOp::Relu, "relu", kNumericTypes, false},
    {UnaryOp::Silu, "silu", kFloatingTypes, false, IntegerInputs::Refused},
    {UnaryOp::Gelu, "gelu", kFloatingTypes, false, IntegerInputs::Refused},          // erf form
    {UnaryOp::GeluTanh, "gelu_tanh", kFloatingTypes, false, IntegerInputs::Refused},  // tanh approximation
    {UnaryOp::Elu, "elu", kFloatingTypes, false, IntegerInputs::Refused},                // alpha
    {UnaryOp::LeakyRelu, "leaky_relu", kFloatingTypes, false, IntegerInputs::Refused},   // alpha = negative slope
    {UnaryOp::Softplus, "softplus", kFloatingTypes, false, IntegerInputs::Refused},      // alpha = beta, beta = threshold
    {UnaryOp::Clamp, "clamp", kNumericTypes, false},             // lower, upper
    {UnaryOp::PowScalar, "pow", kNumericTypes, false},           // beta = exponent
    {UnaryOp::LogicalNot, "logical_not", kAllTypes, true},
    {UnaryOp::IsNan, "isnan", kAllTypes, true},
    {UnaryOp::IsInf, "isinf", kAllTypes, true},
    {UnaryOp::IsFinite, "isfinite", kAllTypes, true},
};

inline constexpr BinaryOpInfo kBinaryOps[] = {
    {BinaryOp::Add, "add", kNumericTypes, false, false},  // a + alpha * b
    {BinaryOp::Sub, "sub", kNumericTypes, false, false},
    {BinaryOp::Mul, "mul", kNumericTypes, false, false},
    {BinaryOp::Div, "div", kFloatingTypes, false, false},
    {BinaryOp::Maximum, "maximum", kNumericTypes, false, false},
    {BinaryOp::Minimum, "minimum", kNumericTypes, false, false},
    {BinaryOp::Pow, "pow", kNumericTypes, false, false},
    {BinaryOp::Eq, "eq", kAllTypes, true, false},
    {BinaryOp::Ne, "ne", kAllTypes, true, false},
    {BinaryOp::Lt, "lt", kAllTypes, true, false},
    {BinaryOp::Le, "le", kAllTypes, true, false},
    {BinaryOp::Gt, "gt", kAllTypes, true, false},
    {BinaryOp::Ge, "ge", kAllTypes, true, false},
    {BinaryOp::LogicalAnd, "logical_and", kAllTypes, true, false},
    {BinaryOp::LogicalOr, "logical_or", kAllTypes, true, false},
    {BinaryOp::ReluBackward, "relu_backward", kFloatingTypes, false, true},        // saved = output
    {BinaryOp::SigmoidBackward, "sigmoid_backward", kFloatingTypes, false, true},  // saved = output
    {BinaryOp::TanhBackward, "tanh_backward", kFloatingTypes, false, true},        // saved = output
    {BinaryOp::SiluBackward, "silu_backward", kFloatingTypes, false, true},        // saved = input
    {BinaryOp::GeluBackward, "gelu_backward", kFloatingTypes, false, true},        // saved = input
    {BinaryOp::GeluTanhBackward, "gelu_tanh_backward", kFloatingTypes, false, true},  // saved = input
    {BinaryOp::EluBackward, "elu_backward", kFloatingTypes, false, true},          // input; alpha
    {BinaryOp::LeakyReluBackward, "leaky_relu_backward", kFloatingTypes, false, true},  // input; alpha
    {BinaryOp::SoftplusBackward, "softplus_backward", kFloatingTypes, false, true},  // input; alpha, beta
    {BinaryOp::ClampBackward, "clamp_backward", kFloatingTypes, false, true},  // input: g where lower <= x <= upper
};

// Row i describes code i, and there is one row per code.
template <typename Row, size_t kRows>
constexpr bool rows_in_code_order(const Row (&rows)[kRows]) {
  for (size_t i = 0; i < kRows; ++i)
    if (static_cast<size_t>(rows[i].op) != i) return false;
  return true;
}
static_assert(std::size(kUnaryOps) == kNumUnaryOps, "kUnaryOps needs one row per UnaryOp code");
static_assert(std::size(kBinaryOps) == kNumBinaryOps, "kBinaryOps needs one row per BinaryOp code");
static_assert(rows_in_code_order(kUnaryOps), "kUnaryOps rows must follow the UnaryOp order");
static_assert(rows_in_code_order(kBinaryOps), "kBinaryOps rows must follow the BinaryOp order");

constexpr const UnaryOpInfo& op_info(UnaryOp op) { return kUnaryOps[static_cast<size_t>(op)]; }
constexpr const BinaryOpInfo& op_info(BinaryOp op) { return kBinaryOps[static_cast<size_t>(op)]; }

// Names for error messages ("add", "relu_backward").
constexpr const char* op_name(UnaryOp op) { return op_info(op).name; }
constexpr const char* op_name(BinaryOp op) { return op_info(op).name; }

// Computed in floating point only: integer and Bool inputs are computed in float32, or
// refused (Note [Integer inputs]).
constexpr bool floating_only(UnaryOp op) { return op_info(op).dtypes == kFloatingTypes; }
constexpr bool floating_only(BinaryOp op) { return op_info(op).dtypes == kFloatingTypes; }

// An integer or Bool input is an error (Note [Integer inputs]); binary codes never refuse.
constexpr bool refuses_integers(UnaryOp op) {
  return floating_only(op) && op_info(op).integer_inputs == IntegerInputs::Refused;
}

// The dtype a code (UnaryOp or BinaryOp) computes in when its (promoted) inputs are
// `input`: float32 for an integer or Bool input of a floating-only code, else `input`.
template <typename Op>
constexpr DType compute_dtype(Op op, DType input) {
  return floating_only(op) && !is_floating(input) ? kDefaultFloat : input;
}

// The dtype of its result: Bool for a bool_result code, else the compute dtype.
template <typename Op>
constexpr DType result_dtype(Op op, DType input) {
  return op_info(op).bool_result ? DType::Bool : compute_dtype(op, input);
}

// Only a floating-only code may refuse integers: the others compute them.
constexpr bool refusals_are_floating_only() {
  for (const UnaryOpInfo& row : kUnaryOps)
    if (row.integer_inputs == IntegerInputs::Refused && row.dtypes != kFloatingTypes) return false;
  return true;
}
static_assert(refusals_are_floating_only(), "IntegerInputs::Refused on a code that is not floating-only");

}  // namespace kiln
