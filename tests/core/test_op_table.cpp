// The op table (core/op_table.h) against the CPU backend, code by code: for every UnaryOp
// and BinaryOp code, the backend computes it in exactly the dtypes of its row (any other
// is an error naming the op), its result is Bool exactly when the row says so, its values
// in float64 match a reference written here from the op's definition (special values
// included), and the op layer computes integer inputs of a floating-only code in float32
// or refuses them, as its row says (Note [Integer inputs]).
// The loops run over 0 .. kNumUnaryOps - 1, so a new code fails here until it has a
// reference. (The CUDA backend's parity test, tests/cuda/test_cuda_elementwise.cpp, loops
// over the same range against this backend.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <set>
#include <string>

#include "core/ops.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kPi = 3.14159265358979323846;

// The parameters every code is run with, and what the references below assume.
constexpr ElementwiseParams kParams{.alpha = 0.7, .beta = 3.0, .lower = -1.0, .upper = 1.25};

const DType kEveryDType[] = {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16,
                             DType::Int64,   DType::Int32,   DType::UInt8,   DType::Bool};

double sigmoid_of(double x) { return 1 / (1 + std::exp(-x)); }
double gelu_tanh_inner(double x) { return std::sqrt(2 / kPi) * (x + 0.044715 * x * x * x); }

using UnaryReference = std::function<double(double)>;
using BinaryReference = std::function<double(double, double)>;

// The float64 value of code `op` at x, from the op's definition, with kParams.
UnaryReference unary_reference(UnaryOp op) {
  const ElementwiseParams p = kParams;
  switch (op) {
    case UnaryOp::Neg: return [](double x) { return -x; };
    case UnaryOp::Abs: return [](double x) { return std::abs(x); };
    // sign(NaN) = 0, as PyTorch's (0 < x) - (x < 0) gives (pytorch/pytorch#41245).
    case UnaryOp::Sign: return [](double x) { return double((x > 0) - (x < 0)); };
    case UnaryOp::Square: return [](double x) { return x * x; };
    case UnaryOp::Sqrt: return [](double x) { return std::sqrt(x); };
    case UnaryOp::Rsqrt: return [](double x) { return 1 / std::sqrt(x); };
    case UnaryOp::Exp: return [](double x) { return std::exp(x); };
    case UnaryOp::Log: return [](double x) { return std::log(x); };
    case UnaryOp::Reciprocal: return [](double x) { return 1 / x; };
    case UnaryOp::Sigmoid: return sigmoid_of;
    case UnaryOp::Tanh: return [](double x) { return std::tanh(x); };
    case UnaryOp::Relu: return [](double x) { return std::isnan(x) ? x : std::max(x, 0.0); };
    case UnaryOp::Silu: return [](double x) { return x * sigmoid_of(x); };
    case UnaryOp::Gelu: return [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); };
    case UnaryOp::GeluTanh: return [](double x) { return 0.5 * x * (1 + std::tanh(gelu_tanh_inner(x))); };
    case UnaryOp::Elu: return [p](double x) { return x > 0 ? x : p.alpha * (std::exp(x) - 1); };
    case UnaryOp::LeakyRelu: return [p](double x) { return x > 0 ? x : p.alpha * x; };
    case UnaryOp::Softplus:
      return [p](double x) { return p.alpha * x > p.beta ? x : std::log1p(std::exp(p.alpha * x)) / p.alpha; };
    case UnaryOp::Clamp: return [p](double x) { return std::isnan(x) ? x : std::clamp(x, p.lower, p.upper); };
    case UnaryOp::PowScalar: return [p](double x) { return std::pow(x, p.beta); };
    case UnaryOp::LogicalNot: return [](double x) { return double(x == 0); };
    case UnaryOp::IsNan: return [](double x) { return double(std::isnan(x)); };
    case UnaryOp::IsInf: return [](double x) { return double(std::isinf(x)); };
    case UnaryOp::IsFinite: return [](double x) { return double(std::isfinite(x)); };
    case UnaryOp::kCount: break;
  }
  return nullptr;  // a code without a reference: the tests below fail and name it
}

// The float64 value of code `op` at (a, b); backward codes read (grad_out, saved).
BinaryReference binary_reference(BinaryOp op) {
  const ElementwiseParams p = kParams;
  const auto nan_first = [](double a, double b, double otherwise) { return std::isnan(a) ? a : std::isnan(b) ? b : otherwise; };
  switch (op) {
    case BinaryOp::Add: return [p](double a, double b) { return a + p.alpha * b; };
    case BinaryOp::Sub: return [](double a, double b) { return a - b; };
    case BinaryOp::Mul: return [](double a, double b) { return a * b; };
    case BinaryOp::Div: return [](double a, double b) { return a / b; };
    case BinaryOp::Maximum: return [nan_first](double a, double b) { return nan_first(a, b, std::max(a, b)); };
    case BinaryOp::Minimum: return [nan_first](double a, double b) { return nan_first(a, b, std::min(a, b)); };
    case BinaryOp::Pow: return [](double a, double b) { return std::pow(a, b); };
    case BinaryOp::Eq: return [](double a, double b) { return double(a == b); };
    case BinaryOp::Ne: return [](double a, double b) { return double(a != b); };
    case BinaryOp::Lt: return [](double a, double b) { return double(a < b); };
    case BinaryOp::Le: return [](double a, double b) { return double(a <= b); };
    case BinaryOp::Gt: return [](double a, double b) { return double(a > b); };
    case BinaryOp::Ge: return [](double a, double b) { return double(a >= b); };
    case BinaryOp::LogicalAnd: return [](double a, double b) { return double(a != 0 && b != 0); };
    case BinaryOp::LogicalOr: return [](double a, double b) { return double(a != 0 || b != 0); };
    case BinaryOp::ReluBackward: return [](double g, double y) { return y > 0 ? g : 0.0; };
    case BinaryOp::SigmoidBackward: return [](double g, double y) { return g * y * (1 - y); };
    case BinaryOp::TanhBackward: return [](double g, double y) { return g * (1 - y * y); };
    case BinaryOp::SiluBackward:
      return [](double g, double x) { return g * sigmoid_of(x) * (1 + x * (1 - sigmoid_of(x))); };
    case BinaryOp::GeluBackward:
      return [](double g, double x) {
        return g * (0.5 * (1 + std::erf(x / std::sqrt(2.0))) + x * std::exp(-x * x / 2) / std::sqrt(2 * kPi));
      };
    case BinaryOp::GeluTanhBackward:
      return [](double g, double x) {
        const double t = std::tanh(gelu_tanh_inner(x));
        return g * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * std::sqrt(2 / kPi) * (1 + 3 * 0.044715 * x * x));
      };
    case BinaryOp::EluBackward: return [p](double g, double x) { return x > 0 ? g : g * p.alpha * std::exp(x); };
    case BinaryOp::LeakyReluBackward: return [p](double g, double x) { return x > 0 ? g : g * p.alpha; };
    case BinaryOp::SoftplusBackward:
      return [p](double g, double x) { return p.alpha * x > p.beta ? g : g * sigmoid_of(p.alpha * x); };
    case BinaryOp::ClampBackward:
      return [p](double g, double x) { return x >= p.lower && x <= p.upper ? g : 0.0; };
    case BinaryOp::kCount: break;
  }
  return nullptr;
}

// Inputs: random values of both signs, the kinks and bounds of the ops (0, -1, 1.25, the
// softplus threshold at 3 / 0.7), and the special values.
std::vector<double> probe_values() {
  std::vector<double> values = mul(testing::random_nonzero({48}, DType::Float64, 5), 2.0).to_vector<double>();
  for (double special : {0.0, -1.0, 1.25, 4.0, 5.0, -5.0, 3.5, kInf, -kInf, kNaN}) values.push_back(special);
  return values;
}

// Equal, both NaN, or within 1e-12 relative: the kernel and the reference both compute
// in double, up to the order of a few operations.
::testing::AssertionResult close_to_reference(double actual, double expected) {
  if (std::isnan(actual) && std::isnan(expected)) return ::testing::AssertionSuccess();
  if (actual == expected || std::abs(actual - expected) <= 1e-12 * (1 + std::abs(expected)))
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << actual << " != reference " << expected;
}

DType out_dtype_of(bool bool_result, DType in) { return bool_result ? DType::Bool : in; }

TEST(OpTable, NamesAreUniqueAndNonEmpty) {
  std::set<std::string> names;
  for (int code = 0; code < kNumUnaryOps; ++code) names.insert(op_name(static_cast<UnaryOp>(code)));
  EXPECT_EQ(names.size(), static_cast<size_t>(kNumUnaryOps));
  std::set<std::string> binary_names;
  for (int code = 0; code < kNumBinaryOps; ++code) binary_names.insert(op_name(static_cast<BinaryOp>(code)));
  EXPECT_EQ(binary_names.size(), static_cast<size_t>(kNumBinaryOps));
  EXPECT_EQ(names.count(""), 0u);
  EXPECT_EQ(binary_names.count(""), 0u);
}

TEST(OpTable, EveryUnaryCodeRunsInExactlyTheDtypesOfItsRow) {
  for (int code = 0; code < kNumUnaryOps; ++code) {
    const UnaryOp op = static_cast<UnaryOp>(code);
    for (DType dtype : kEveryDType) {
      SCOPED_TRACE(std::string(op_name(op)) + " " + std::string(dtype_name(dtype)));
      const Tensor in = ones({5}, {.dtype = dtype});
      const Tensor out = empty({5}, {.dtype = out_dtype_of(op_info(op).bool_result, dtype)});
      if (op_info(op).dtypes.has(dtype)) {
        EXPECT_NO_THROW(backend(Device::cpu()).unary(op, in, out, kParams));
      } else {
        EXPECT_KILN_ERROR(backend(Device::cpu()).unary(op, in, out, kParams), op_name(op), "unsupported dtype");
      }
    }
  }
}

TEST(OpTable, EveryBinaryCodeRunsInExactlyTheDtypesOfItsRow) {
  for (int code = 0; code < kNumBinaryOps; ++code) {
    const BinaryOp op = static_cast<BinaryOp>(code);
    for (DType dtype : kEveryDType) {
      SCOPED_TRACE(std::string(op_name(op)) + " " + std::string(dtype_name(dtype)));
      const Tensor a = ones({5}, {.dtype = dtype});
      const Tensor out = empty({5}, {.dtype = out_dtype_of(op_info(op).bool_result, dtype)});
      if (op_info(op).dtypes.has(dtype)) {
        EXPECT_NO_THROW(backend(Device::cpu()).binary(op, a, a, out, kParams));
      } else {
        EXPECT_KILN_ERROR(backend(Device::cpu()).binary(op, a, a, out, kParams), op_name(op), "unsupported dtype");
      }
    }
  }
}

TEST(OpTable, EveryUnaryCodeMatchesItsReference) {
  const std::vector<double> x = probe_values();
  const Tensor in = tensor(x, {static_cast<int64_t>(x.size())});
  for (int code = 0; code < kNumUnaryOps; ++code) {
    const UnaryOp op = static_cast<UnaryOp>(code);
    SCOPED_TRACE(op_name(op));
    const UnaryReference reference = unary_reference(op);
    ASSERT_TRUE(reference) << "no reference for " << op_name(op) << ": add one to unary_reference";
    const Tensor out = empty(in.sizes(), {.dtype = out_dtype_of(op_info(op).bool_result, DType::Float64)});
    backend(Device::cpu()).unary(op, in, out, kParams);
    const std::vector<double> actual = out.to_vector<double>();
    for (size_t i = 0; i < x.size(); ++i) EXPECT_TRUE(close_to_reference(actual[i], reference(x[i]))) << "x = " << x[i];
  }
}

TEST(OpTable, EveryBinaryCodeMatchesItsReference) {
  const std::vector<double> a = probe_values();
  const std::vector<double> b(a.rbegin(), a.rend());  // every value meets several others
  const int64_t n = static_cast<int64_t>(a.size());
  const Tensor ta = tensor(a, {n}), tb = tensor(b, {n});
  for (int code = 0; code < kNumBinaryOps; ++code) {
    const BinaryOp op = static_cast<BinaryOp>(code);
    SCOPED_TRACE(op_name(op));
    const BinaryReference reference = binary_reference(op);
    ASSERT_TRUE(reference) << "no reference for " << op_name(op) << ": add one to binary_reference";
    const Tensor out = empty({n}, {.dtype = out_dtype_of(op_info(op).bool_result, DType::Float64)});
    backend(Device::cpu()).binary(op, ta, tb, out, kParams);
    const std::vector<double> actual = out.to_vector<double>();
    for (size_t i = 0; i < a.size(); ++i)
      EXPECT_TRUE(close_to_reference(actual[i], reference(a[i], b[i]))) << "a = " << a[i] << ", b = " << b[i];
  }
}

TEST(OpTable, IntegerInputsOfFloatingOnlyCodesComputeInFloat32OrAreRefused) {
  const Tensor ints = tensor<int32_t>({1, 2, 4});
  for (int code = 0; code < kNumUnaryOps; ++code) {
    const UnaryOp op = static_cast<UnaryOp>(code);
    SCOPED_TRACE(op_name(op));
    if (refuses_integers(op)) {
      EXPECT_KILN_ERROR(unary_kernel(op, ints, kParams), op_name(op), "expected a floating-point tensor, got int32");
      continue;
    }
    const DType expected = op_info(op).bool_result ? DType::Bool : floating_only(op) ? DType::Float32 : DType::Int32;
    EXPECT_EQ(unary_kernel(op, ints, kParams).dtype(), expected);
  }
  for (int code = 0; code < kNumBinaryOps; ++code) {
    const BinaryOp op = static_cast<BinaryOp>(code);
    SCOPED_TRACE(op_name(op));
    const DType expected = op_info(op).bool_result ? DType::Bool : floating_only(op) ? DType::Float32 : DType::Int32;
    EXPECT_EQ(binary_kernel(op, ints, ints, kParams).dtype(), expected);
  }
}

}  // namespace
}  // namespace kiln
