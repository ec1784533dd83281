// Elementwise ops against naive reference loops: every unary and binary op in every
// dtype it supports, on random non-zero, non-contiguous and broadcast inputs; type
// promotion; error messages; and a gradient check per differentiable op of
// core/ops/elementwise.h. The activations (forward values, errors, gradient checks) are
// in test_activation.cpp, the in-place forms in test_inplace.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>

#include "core/ops.h"
#include "tests/core/unary_reference.h"
#include "tests/gradcheck.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

using testing::all_close;
using testing::all_equal;
using testing::gradcheck;
using testing::non_contiguous;
using testing::random_nonzero;
using testing::random_uniform;
using testing::uniform_leaf;
using testing::UnaryCase;
using testing::expect_unary_cases_match_reference;

const DType kFloatTypes[] = {DType::Float64, DType::Float32, DType::Float16, DType::BFloat16};

// Broadcasts a and b by hand (row-major walk over the output shape).
Tensor reference_binary(const Tensor& a, const Tensor& b, const std::function<double(double, double)>& ref,
                        DType out_dtype) {
  const std::vector<int64_t> shape = broadcast_shapes(a.sizes(), b.sizes(), "ref");
  const Tensor ae = a.expand(shape).contiguous(), be = b.expand(shape).contiguous();
  const std::vector<double> av = ae.to_vector<double>(), bv = be.to_vector<double>();
  std::vector<double> out(av.size());
  for (size_t i = 0; i < av.size(); ++i) out[i] = ref(av[i], bv[i]);
  return tensor(out, shape).to(out_dtype);
}

// The activations' cases are in test_activation.cpp.
std::vector<UnaryCase> unary_cases() {
  return {
      {"neg", [](const Tensor& x) { return neg(x); }, [](double v) { return -v; }, -2, 2},
      {"abs", [](const Tensor& x) { return abs(x); }, [](double v) { return std::abs(v); }, -2, 2},
      {"sign", [](const Tensor& x) { return sign(x); }, [](double v) { return double((v > 0) - (v < 0)); }, -2, 2},
      {"square", [](const Tensor& x) { return square(x); }, [](double v) { return v * v; }, -2, 2},
      {"sqrt", [](const Tensor& x) { return sqrt(x); }, [](double v) { return std::sqrt(v); }, 0.1, 4},
      {"rsqrt", [](const Tensor& x) { return rsqrt(x); }, [](double v) { return 1 / std::sqrt(v); }, 0.1, 4},
      {"exp", [](const Tensor& x) { return exp(x); }, [](double v) { return std::exp(v); }, -3, 3},
      {"log", [](const Tensor& x) { return log(x); }, [](double v) { return std::log(v); }, 0.1, 4},
      {"reciprocal", [](const Tensor& x) { return reciprocal(x); }, [](double v) { return 1 / v; }, 0.5, 3},
      {"clamp", [](const Tensor& x) { return clamp(x, -0.5, 0.75); }, [](double v) { return std::clamp(v, -0.5, 0.75); },
       -2, 2},
      {"pow", [](const Tensor& x) { return pow(x, 3.0); }, [](double v) { return v * v * v; }, -2, 2},
      {"pow_half", [](const Tensor& x) { return pow(x, 0.5); }, [](double v) { return std::sqrt(v); }, 0.1, 3},
  };
}

TEST(Elementwise, UnaryOpsMatchReferenceInEveryFloatDtype) { expect_unary_cases_match_reference(unary_cases()); }

TEST(Elementwise, UnaryOpsOnEmptyAndZeroDimTensors) {
  const Tensor empty_x = zeros({0, 3});
  EXPECT_EQ(exp(empty_x).sizes(), (std::vector<int64_t>{0, 3}));
  const Tensor s = scalar_tensor(2.0, {.dtype = DType::Float64});
  EXPECT_DOUBLE_EQ(sqrt(s).item<double>(), std::sqrt(2.0));
  EXPECT_EQ(sqrt(s).dim(), 0);
}

TEST(Elementwise, FloatingFunctionsOfIntegersComputeInFloat32) {
  const Tensor i = arange(1, 5);
  EXPECT_EQ(exp(i).dtype(), DType::Float32);
  EXPECT_EQ(sqrt(i).dtype(), DType::Float32);
  EXPECT_TRUE(all_close(sqrt(i), tensor<float>({1.f, std::sqrt(2.f), std::sqrt(3.f), 2.f})));
  EXPECT_EQ(neg(i).dtype(), DType::Int64);
  EXPECT_TRUE(all_equal(abs(tensor<int32_t>({-3, 4})), tensor<int32_t>({3, 4})));
  EXPECT_TRUE(all_equal(clamp(tensor<int64_t>({-9, 0, 9}), -2, 3), tensor<int64_t>({-2, 0, 3})));
}

struct BinaryCase {
  const char* name;
  std::function<Tensor(const Tensor&, const Tensor&)> op;
  std::function<double(double, double)> ref;
};

std::vector<BinaryCase> binary_cases() {
  return {
      {"add", [](const Tensor& a, const Tensor& b) { return add(a, b); }, [](double a, double b) { return a + b; }},
      {"add_alpha", [](const Tensor& a, const Tensor& b) { return add(a, b, 2.5); },
       [](double a, double b) { return a + 2.5 * b; }},
      {"sub", [](const Tensor& a, const Tensor& b) { return sub(a, b); }, [](double a, double b) { return a - b; }},
      {"mul", [](const Tensor& a, const Tensor& b) { return mul(a, b); }, [](double a, double b) { return a * b; }},
      {"div", [](const Tensor& a, const Tensor& b) { return div(a, b); }, [](double a, double b) { return a / b; }},
      {"maximum", [](const Tensor& a, const Tensor& b) { return maximum(a, b); },
       [](double a, double b) { return std::max(a, b); }},
      {"minimum", [](const Tensor& a, const Tensor& b) { return minimum(a, b); },
       [](double a, double b) { return std::min(a, b); }},
      {"pow", [](const Tensor& a, const Tensor& b) { return pow(abs(a), b); },
       [](double a, double b) { return std::pow(std::abs(a), b); }},
  };
}

TEST(Elementwise, BinaryOpsMatchReferenceWithBroadcasting) {
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> shapes = {
      {{4, 5}, {4, 5}}, {{3, 1, 5}, {4, 5}}, {{5}, {2, 3, 5}}, {{}, {3, 2}}, {{1}, {7}}, {{6, 1}, {1, 7}}};
  for (const BinaryCase& c : binary_cases()) {
    for (DType dtype : kFloatTypes) {
      for (const auto& [sa, sb] : shapes) {
        SCOPED_TRACE(std::string(c.name) + " " + std::string(dtype_name(dtype)));
        const Tensor a = random_nonzero(sa, dtype, 3);
        const Tensor b = random_nonzero(sb, dtype, 4);
        const Tensor expected = reference_binary(a, b, c.ref, dtype);
        const Tensor got = c.op(a, b);
        EXPECT_EQ(got.dtype(), dtype);
        EXPECT_TRUE(all_close(got, expected));
        if (a.dim() > 0 && b.dim() > 0) {
          EXPECT_TRUE(all_close(c.op(non_contiguous(a), non_contiguous(b)), expected));
        }
      }
    }
  }
}

TEST(Elementwise, IntegerArithmeticIsExactAndDivisionIsTrue) {
  const Tensor a = tensor<int64_t>({7, -8, 9, 100});
  const Tensor b = tensor<int64_t>({2, 3, -4, 7});
  EXPECT_TRUE(all_equal(add(a, b), tensor<int64_t>({9, -5, 5, 107})));
  EXPECT_TRUE(all_equal(mul(a, b), tensor<int64_t>({14, -24, -36, 700})));
  EXPECT_TRUE(all_equal(sub(a, b, 2), tensor<int64_t>({3, -14, 17, 86})));
  EXPECT_TRUE(all_equal(pow(a, tensor<int64_t>({2, 3, 0, 1})), tensor<int64_t>({49, -512, 1, 100})));
  const Tensor q = div(a, b);
  EXPECT_EQ(q.dtype(), DType::Float32);
  EXPECT_TRUE(all_close(q, tensor<float>({3.5f, -8.f / 3, -2.25f, 100.f / 7})));
  EXPECT_TRUE(all_equal(maximum(a, b), tensor<int64_t>({7, 3, 9, 100})));
}

// Note [Integer overflow wraps]: as in PyTorch, integer arithmetic wraps modulo 2^bits
// (it was signed overflow, undefined behaviour, which UBSan reports in make sanitize).
TEST(Elementwise, IntegerOverflowWrapsAsInPyTorch) {
  const Tensor big = tensor<int64_t>({INT64_MAX, INT64_MIN, INT64_MAX, 3});
  const Tensor one = tensor<int64_t>({1, 1, 2, 1});
  EXPECT_TRUE(all_equal(add(big, one), tensor<int64_t>({INT64_MIN, INT64_MIN + 1, INT64_MIN + 1, 4})));
  EXPECT_TRUE(all_equal(sub(big, one, 3), tensor<int64_t>({INT64_MAX - 3, INT64_MAX - 2, INT64_MAX - 6, 0})));
  EXPECT_TRUE(all_equal(mul(big, tensor<int64_t>({2, 2, 3, 2})), tensor<int64_t>({-2, 0, INT64_MAX - 2, 6})));
  EXPECT_TRUE(all_equal(neg(big), tensor<int64_t>({INT64_MIN + 1, INT64_MIN, INT64_MIN + 1, -3})));
  EXPECT_TRUE(all_equal(abs(big), tensor<int64_t>({INT64_MAX, INT64_MIN, INT64_MAX, 3})));
  EXPECT_TRUE(all_equal(square(tensor<int64_t>({int64_t{1} << 32, 3})), tensor<int64_t>({0, 9})));
  EXPECT_TRUE(all_equal(pow(tensor<int64_t>({2, 3}), tensor<int64_t>({64, 41})),
                        tensor<int64_t>({0, static_cast<int64_t>(0xfa2a1cf67b5fb863ULL)})));  // 3^41 mod 2^64
  const Tensor i32 = tensor<int32_t>({INT32_MAX, INT32_MIN});
  EXPECT_TRUE(all_equal(add(i32, tensor<int32_t>({1, -1})), tensor<int32_t>({INT32_MIN, INT32_MAX})));
  EXPECT_TRUE(all_equal(mul(i32, tensor<int32_t>({2, 2})), tensor<int32_t>({-2, 0})));
  EXPECT_TRUE(all_equal(add(tensor<uint8_t>({250, 3}), tensor<uint8_t>({10, 255})), tensor<uint8_t>({4, 2})));
  // Sums wrap too, whatever the reduction's order.
  EXPECT_EQ(tensor<int64_t>({INT64_MAX, 1, 5}).sum().item<int64_t>(), INT64_MIN + 5);
  EXPECT_EQ(tensor<int32_t>({INT32_MAX, 1}).sum().item<int64_t>(), int64_t{INT32_MAX} + 1);  // summed in int64
}

TEST(Elementwise, TypePromotionFollowsPyTorch) {
  const Tensor i32 = tensor<int32_t>({1, 2});
  const Tensor f16 = tensor<float>({1, 2}).to(DType::Float16);
  const Tensor bf16 = tensor<float>({1, 2}).to(DType::BFloat16);
  EXPECT_EQ(mul(i32, 2.5).dtype(), DType::Float32);
  EXPECT_EQ(mul(i32, 2).dtype(), DType::Int32);
  EXPECT_EQ(mul(f16, 2.5).dtype(), DType::Float16);
  EXPECT_EQ(add(f16, bf16).dtype(), DType::Float32);
  EXPECT_EQ(add(i32, f16).dtype(), DType::Float16);
  EXPECT_EQ(add(tensor<float>({1.f}), scalar_tensor(1.0, {.dtype = DType::Float64})).dtype(), DType::Float32);
  EXPECT_EQ(add(i32, scalar_tensor(1.0, {.dtype = DType::Float64})).dtype(), DType::Float64);
  EXPECT_EQ(add(tensor<uint8_t>({1}), i32).dtype(), DType::Int32);
  EXPECT_TRUE(all_close(mul(i32, 2.5), tensor<float>({2.5f, 5.f})));
  EXPECT_TRUE(all_close(3.0 - tensor<double>({1, 2}), tensor<double>({2, 1})));
  EXPECT_TRUE(all_close(6.0 / tensor<double>({2, 3}), tensor<double>({3, 2})));
}

// Large transposed operands take the engine's tiled walk (both inner dims >= its tile):
// values must match index arithmetic done by hand, including ragged edge tiles and an
// outer batch dim.
TEST(Elementwise, TransposedOperandsTakeTheTiledPathCorrectly) {
  const int64_t b = 3, r = 70, c = 45;
  const Tensor x = arange(b * r * c, {.dtype = DType::Float64}).reshape({b, r, c});
  const Tensor xt = x.transpose(1, 2).contiguous();  // [b, c, r]
  const std::vector<double> v = xt.to_vector<double>();
  for (int64_t i = 0; i < b; ++i)
    for (int64_t j = 0; j < c; ++j)
      for (int64_t k = 0; k < r; ++k) ASSERT_EQ(v[(i * c + j) * r + k], double((i * r + k) * c + j));
  const Tensor y = random_nonzero({b, c, r}, DType::Float32, 3);
  const Tensor sum_t = add(x.transpose(1, 2).to(DType::Float32), y);
  EXPECT_TRUE(all_close(sum_t, reference_binary(xt, y, [](double p, double q) { return p + q; }, DType::Float32)));
  Tensor dst = zeros({c, r}, {.dtype = DType::Float64}).t();  // a transposed destination
  dst.copy_(x.select(0, 1));
  EXPECT_TRUE(all_equal(dst.contiguous(), x.select(0, 1)));
}

TEST(Elementwise, ComparisonsAndLogicGiveBool) {
  const Tensor a = tensor<double>({1, 2, 3, 4});
  const Tensor b = tensor<double>({4, 2, 1, 4});
  EXPECT_TRUE(all_equal(eq(a, b), tensor<bool>({false, true, false, true})));
  EXPECT_TRUE(all_equal(ne(a, b), tensor<bool>({true, false, true, false})));
  EXPECT_TRUE(all_equal(lt(a, b), tensor<bool>({true, false, false, false})));
  EXPECT_TRUE(all_equal(le(a, b), tensor<bool>({true, true, false, true})));
  EXPECT_TRUE(all_equal(gt(a, b), tensor<bool>({false, false, true, false})));
  EXPECT_TRUE(all_equal(ge(a, b), tensor<bool>({false, true, true, true})));
  EXPECT_TRUE(all_equal(gt(a, 2.5), tensor<bool>({false, false, true, true})));
  EXPECT_TRUE(all_equal(logical_and(gt(a, 1), lt(b, 4)), tensor<bool>({false, true, true, false})));
  EXPECT_TRUE(all_equal(logical_or(gt(a, 3), lt(b, 2)), tensor<bool>({false, false, true, true})));
  EXPECT_TRUE(all_equal(logical_not(tensor<int32_t>({0, 5})), tensor<bool>({true, false})));
  const double inf = std::numeric_limits<double>::infinity(), nan = std::nan("");
  const Tensor special = tensor<double>({1, inf, -inf, nan});
  EXPECT_TRUE(all_equal(isnan(special), tensor<bool>({false, false, false, true})));
  EXPECT_TRUE(all_equal(isinf(special), tensor<bool>({false, true, true, false})));
  EXPECT_TRUE(all_equal(isfinite(special), tensor<bool>({true, false, false, false})));
  // Mixed dtypes compare in the promoted type.
  EXPECT_TRUE(all_equal(eq(tensor<int32_t>({1, 2}), tensor<float>({1.f, 2.5f})), tensor<bool>({true, false})));
}

TEST(Elementwise, NanPropagatesThroughReluClampMaximumMinimum) {
  const double nan = std::nan("");
  const Tensor x = tensor<double>({nan, 1});
  EXPECT_TRUE(std::isnan(relu(x).to_vector<double>()[0]));
  EXPECT_TRUE(std::isnan(clamp(x, 0, 0.5).to_vector<double>()[0]));
  EXPECT_TRUE(std::isnan(maximum(x, tensor<double>({0, 0})).to_vector<double>()[0]));
  EXPECT_TRUE(std::isnan(minimum(tensor<double>({0, 0}), x).to_vector<double>()[0]));
}

TEST(Elementwise, WhereBroadcastsAndPromotes) {
  const Tensor cond = tensor<bool>({true, false, true}, {3, 1});
  const Tensor a = tensor<double>({1, 2}, {1, 2});
  const Tensor b = tensor<float>({-1.f});
  const Tensor got = where(cond, a, b);
  EXPECT_EQ(got.dtype(), DType::Float64);
  EXPECT_TRUE(all_equal(got, tensor<double>({1, 2, -1, -1, 1, 2}, {3, 2})));
  EXPECT_TRUE(all_equal(where(cond, a, 0.5), tensor<double>({1, 2, 0.5, 0.5, 1, 2}, {3, 2})));
}

TEST(Elementwise, ErrorsNameTheOpAndTheShapes) {
  EXPECT_KILN_ERROR(add(zeros({2, 3}), zeros({4})), "add", "[2, 3]", "[4]", "broadcast");
  EXPECT_KILN_ERROR(mul(zeros({2}), Tensor()), "mul", "undefined");
  EXPECT_KILN_ERROR(neg(tensor<bool>({true})), "neg", "bool");
  EXPECT_KILN_ERROR(where(zeros({2}), zeros({2}), zeros({2})), "where", "bool");
  Tensor x = zeros({2, 3});
  EXPECT_KILN_ERROR(x.add_(zeros({4, 2, 3})), "add_");
  Tensor i = zeros({2}, {.dtype = DType::Int64});
  EXPECT_KILN_ERROR(i.add_(zeros({2})), "add_", "can't be cast");
  EXPECT_KILN_ERROR(clamp(x, std::nullopt, std::nullopt), "clamp", "at least one");
}

// ---- gradient checks ------------------------------------------------------------------------

using Inputs = std::vector<Tensor>;

KILN_GRADCHECK_TEST(add) {
  EXPECT_TRUE(gradcheck([](const Inputs& v) { return add(v[0], v[1], 0.5); }, {uniform_leaf({3, 4}, 1), uniform_leaf({4}, 2)}));
  EXPECT_TRUE(gradcheck([](const Inputs& v) { return add(v[0], 2.0); }, {testing::strided_grad_leaf({2, 3}, 3)}));
}

KILN_GRADCHECK_TEST(sub) {
  EXPECT_TRUE(gradcheck([](const Inputs& v) { return sub(v[0], v[1]); }, {uniform_leaf({2, 1, 3}, 1), testing::strided_grad_leaf({4, 3}, 2)}));
}

KILN_GRADCHECK_TEST(mul) {
  EXPECT_TRUE(gradcheck([](const Inputs& v) { return mul(v[0], v[1]); }, {uniform_leaf({3, 4}, 1), uniform_leaf({3, 1}, 2)}));
  EXPECT_TRUE(gradcheck([](const Inputs& v) { return mul(v[0], v[0]); }, {testing::strided_grad_leaf({5}, 3)}));
}

KILN_GRADCHECK_TEST(div) {
  EXPECT_TRUE(gradcheck([](const Inputs& v) { return div(v[0], v[1]); }, {uniform_leaf({3, 4}, 1), testing::grad_leaf({4}, 2)}));
}

KILN_GRADCHECK_TEST(neg) { EXPECT_TRUE(gradcheck([](const Inputs& v) { return neg(v[0]); }, {testing::strided_grad_leaf({3, 2}, 1)})); }

KILN_GRADCHECK_TEST(pow) {
  const Tensor base = random_uniform({3, 3}, 0.5, 2.0, DType::Float64, 1).requires_grad_(true);
  EXPECT_TRUE(gradcheck([](const Inputs& v) { return pow(v[0], v[1]); }, {base, uniform_leaf({3}, 2)}));
  EXPECT_TRUE(gradcheck([](const Inputs& v) { return pow(v[0], 3.0); }, {testing::strided_grad_leaf({4}, 3)}));
  EXPECT_TRUE(gradcheck([](const Inputs& v) { return pow(v[0], -1.5); }, {base}));
}

KILN_GRADCHECK_TEST(sqrt) {
  EXPECT_TRUE(gradcheck([](const Inputs& v) { return sqrt(v[0]); }, {uniform_leaf({3, 4}, 1, 0.2, 3)}));
}

KILN_GRADCHECK_TEST(rsqrt) {
  EXPECT_TRUE(gradcheck([](const Inputs& v) { return rsqrt(v[0]); }, {uniform_leaf({3, 4}, 1, 0.2, 3)}));
}

KILN_GRADCHECK_TEST(exp) { EXPECT_TRUE(gradcheck([](const Inputs& v) { return exp(v[0]); }, {testing::strided_grad_leaf({3, 4}, 1)})); }

KILN_GRADCHECK_TEST(log) {
  EXPECT_TRUE(gradcheck([](const Inputs& v) { return log(v[0]); }, {uniform_leaf({3, 4}, 1, 0.2, 3)}));
}

KILN_GRADCHECK_TEST(reciprocal) {
  EXPECT_TRUE(gradcheck([](const Inputs& v) { return reciprocal(v[0]); }, {testing::grad_leaf({3, 4}, 1)}));
}

KILN_GRADCHECK_TEST(square) {
  EXPECT_TRUE(gradcheck([](const Inputs& v) { return square(v[0]); }, {testing::strided_grad_leaf({3, 4}, 1)}));
}

KILN_GRADCHECK_TEST(abs) { EXPECT_TRUE(gradcheck([](const Inputs& v) { return abs(v[0]); }, {testing::grad_leaf({3, 4}, 1)})); }

KILN_GRADCHECK_TEST(sign) { EXPECT_TRUE(gradcheck([](const Inputs& v) { return sign(v[0]); }, {testing::grad_leaf({5}, 1)})); }

KILN_GRADCHECK_TEST(clamp) {
  EXPECT_TRUE(gradcheck([](const Inputs& v) { return clamp(v[0], -0.6, 0.7); }, {testing::grad_leaf({4, 4}, 1)}));
  EXPECT_TRUE(gradcheck([](const Inputs& v) { return clamp(v[0], std::nullopt, 0.7); }, {testing::strided_grad_leaf({3, 3}, 2)}));
}

KILN_GRADCHECK_TEST(maximum) {
  EXPECT_TRUE(gradcheck([](const Inputs& v) { return maximum(v[0], v[1]); }, {uniform_leaf({3, 4}, 1), uniform_leaf({4}, 2)}));
}

KILN_GRADCHECK_TEST(minimum) {
  EXPECT_TRUE(gradcheck([](const Inputs& v) { return minimum(v[0], v[1]); }, {uniform_leaf({3, 4}, 1), testing::strided_grad_leaf({3, 4}, 2)}));
}

KILN_GRADCHECK_TEST(where) {
  const Tensor cond = gt(random_uniform({3, 4}, -1, 1, DType::Float64, 9), 0.0);
  EXPECT_TRUE(gradcheck([cond](const Inputs& v) { return where(cond, v[0], v[1]); }, {uniform_leaf({3, 4}, 1), uniform_leaf({4}, 2)}));
}

// Subgradients at kinks, pinned: abs'(0) = 0, relu'(0) = 0, clamp passes the gradient at
// its bounds, maximum/minimum split the gradient evenly on ties.
TEST(Elementwise, SubgradientsAtKinksArePinned) {
  Tensor x = tensor<double>({0.0, 0.5, 1.0}).requires_grad_(true);
  abs(x).sum().backward();
  EXPECT_TRUE(all_equal(x.grad(), tensor<double>({0, 1, 1})));
  x.set_grad(Tensor());
  relu(x).sum().backward();
  EXPECT_TRUE(all_equal(x.grad(), tensor<double>({0, 1, 1})));
  x.set_grad(Tensor());
  clamp(x, 0.0, 1.0).sum().backward();
  EXPECT_TRUE(all_equal(x.grad(), tensor<double>({1, 1, 1})));
  x.set_grad(Tensor());
  Tensor y = tensor<double>({0.0, 0.7, 1.0}).requires_grad_(true);
  maximum(x, y).sum().backward();
  EXPECT_TRUE(all_equal(x.grad(), tensor<double>({0.5, 0, 0.5})));
  EXPECT_TRUE(all_equal(y.grad(), tensor<double>({0.5, 1, 0.5})));
}

// Half-precision inputs compute in float32 and round once: compare with float32 results
// rounded to the same dtype.
TEST(Elementwise, HalfPrecisionMatchesFloat32RoundedOnce) {
  for (DType dtype : {DType::Float16, DType::BFloat16}) {
    const Tensor x = random_uniform({257}, -3, 3, dtype, 5);
    const Tensor expected = gelu(x.to(DType::Float32)).to(dtype);
    EXPECT_TRUE(all_equal(gelu(x), expected));
    EXPECT_TRUE(all_equal(mul(x, x), mul(x.to(DType::Float32), x.to(DType::Float32)).to(dtype)));
  }
}

}  // namespace
}  // namespace kiln
