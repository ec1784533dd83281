// The activation functions of core/ops/activation.h: forward values against naive
// float64 references in every float dtype (the unary cases of test_elementwise.cpp, run
// the same way: tests/core/unary_reference.h), what each does with an integer or Bool
// input (PyTorch's answer), errors naming the op and the argument, and a gradient check
// for each, in float64 against central differences, on inputs kept away from the kinks
// at 0.
#include <gtest/gtest.h>

#include <cmath>

#include "core/ops.h"
#include "tests/core/unary_reference.h"
#include "tests/gradcheck.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

using testing::all_close;
using testing::all_equal;
using testing::gradcheck;
using testing::uniform_leaf;
using testing::UnaryCase;
using Inputs = std::vector<Tensor>;

std::vector<UnaryCase> activation_cases() {
  const double pi = 3.14159265358979323846;
  return {
      {"sigmoid", [](const Tensor& x) { return sigmoid(x); }, [](double v) { return 1 / (1 + std::exp(-v)); }, -5, 5},
      {"tanh", [](const Tensor& x) { return tanh(x); }, [](double v) { return std::tanh(v); }, -3, 3},
      {"relu", [](const Tensor& x) { return relu(x); }, [](double v) { return v > 0 ? v : 0; }, -2, 2},
      {"silu", [](const Tensor& x) { return silu(x); }, [](double v) { return v / (1 + std::exp(-v)); }, -4, 4},
      {"gelu", [](const Tensor& x) { return gelu(x); },
       [](double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); }, -3, 3},
      {"gelu_tanh", [](const Tensor& x) { return gelu(x, "tanh"); },
       [pi](double v) { return 0.5 * v * (1 + std::tanh(std::sqrt(2 / pi) * (v + 0.044715 * v * v * v))); }, -3, 3},
      {"elu", [](const Tensor& x) { return elu(x, 0.7); }, [](double v) { return v > 0 ? v : 0.7 * (std::exp(v) - 1); },
       -3, 3},
      {"leaky_relu", [](const Tensor& x) { return leaky_relu(x, 0.1); }, [](double v) { return v > 0 ? v : 0.1 * v; },
       -2, 2},
      {"softplus", [](const Tensor& x) { return softplus(x, 2.0, 3.0); },
       [](double v) { return 2 * v > 3 ? v : std::log1p(std::exp(2 * v)) / 2; }, -3, 3},
  };
}

TEST(Activation, ForwardMatchesReferenceInEveryFloatDtype) {
  testing::expect_unary_cases_match_reference(activation_cases());
}

TEST(Activation, ErrorsNameTheOpAndTheArgument) {
  EXPECT_KILN_ERROR(gelu(zeros({2, 3}), "fast"), "gelu", "approximate");
  EXPECT_KILN_ERROR(prelu(zeros({2, 3}), zeros({2})), "prelu", "3 channels");
}

KILN_GRADCHECK_TEST(relu) { EXPECT_TRUE(gradcheck([](const Inputs& v) { return relu(v[0]); }, {testing::grad_leaf({4, 3}, 1)})); }

KILN_GRADCHECK_TEST(leaky_relu) {
  EXPECT_TRUE(gradcheck([](const Inputs& v) { return leaky_relu(v[0], 0.2); }, {testing::strided_grad_leaf({4, 3}, 1)}));
}

KILN_GRADCHECK_TEST(prelu) {
  EXPECT_TRUE(gradcheck([](const Inputs& v) { return prelu(v[0], v[1]); }, {testing::grad_leaf({2, 3, 4}, 1), uniform_leaf({3}, 2)}));
  EXPECT_TRUE(gradcheck([](const Inputs& v) { return prelu(v[0], v[1]); }, {testing::grad_leaf({2, 3}, 3), uniform_leaf({1}, 4)}));
}

KILN_GRADCHECK_TEST(sigmoid) { EXPECT_TRUE(gradcheck([](const Inputs& v) { return sigmoid(v[0]); }, {uniform_leaf({4, 3}, 1)})); }

KILN_GRADCHECK_TEST(tanh) { EXPECT_TRUE(gradcheck([](const Inputs& v) { return tanh(v[0]); }, {testing::strided_grad_leaf({4, 3}, 1)})); }

KILN_GRADCHECK_TEST(silu) { EXPECT_TRUE(gradcheck([](const Inputs& v) { return silu(v[0]); }, {uniform_leaf({4, 3}, 1, -3, 3)})); }

KILN_GRADCHECK_TEST(gelu) {
  EXPECT_TRUE(gradcheck([](const Inputs& v) { return gelu(v[0]); }, {uniform_leaf({4, 3}, 1, -3, 3)}));
  EXPECT_TRUE(gradcheck([](const Inputs& v) { return gelu(v[0], "tanh"); }, {testing::strided_grad_leaf({4, 3}, 2)}));
}

KILN_GRADCHECK_TEST(elu) { EXPECT_TRUE(gradcheck([](const Inputs& v) { return elu(v[0], 1.3); }, {testing::grad_leaf({4, 3}, 1)})); }

KILN_GRADCHECK_TEST(softplus) {
  EXPECT_TRUE(gradcheck([](const Inputs& v) { return softplus(v[0], 1.5, 2.0); }, {testing::grad_leaf({4, 3}, 1)}));
}

// Note [Integer inputs] (core/op_table.h), PyTorch's behaviour: relu keeps an integer
// dtype (and refuses Bool), sigmoid and tanh compute integers and Bool in float32, and the
// activations PyTorch dispatches on floating types only refuse them.
TEST(Activation, IntegerInputsAsInPyTorch) {
  const Tensor ints = tensor<int64_t>({-2, 0, 3});
  EXPECT_TRUE(all_equal(relu(ints), tensor<int64_t>({0, 0, 3})));
  EXPECT_TRUE(all_equal(relu(tensor<int32_t>({-3, 4})), tensor<int32_t>({0, 4})));
  EXPECT_KILN_ERROR(relu(tensor<bool>({true})), "relu", "bool");

  EXPECT_EQ(sigmoid(ints).dtype(), DType::Float32);
  EXPECT_TRUE(all_close(sigmoid(ints), sigmoid(ints.to(DType::Float32))));
  EXPECT_EQ(tanh(tensor<int32_t>({-1, 2})).dtype(), DType::Float32);
  EXPECT_TRUE(all_close(tanh(tensor<int32_t>({-1, 2})), tanh(tensor<float>({-1, 2}))));
  EXPECT_TRUE(all_close(sigmoid(tensor<bool>({true, false})), sigmoid(tensor<float>({1, 0}))));

  EXPECT_KILN_ERROR(gelu(ints), "gelu", "expected a floating-point tensor", "int64");
  EXPECT_KILN_ERROR(gelu(ints, "tanh"), "gelu_tanh", "floating-point");
  EXPECT_KILN_ERROR(silu(tensor<int32_t>({1})), "silu", "floating-point", "int32");
  EXPECT_KILN_ERROR(elu(tensor<uint8_t>({1})), "elu", "floating-point", "uint8");
  EXPECT_KILN_ERROR(leaky_relu(ints), "leaky_relu", "floating-point");
  EXPECT_KILN_ERROR(softplus(tensor<bool>({true})), "softplus", "floating-point", "bool");
}

}  // namespace
}  // namespace kiln
