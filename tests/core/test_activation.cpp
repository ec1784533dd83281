// The activation functions of core/ops/activation.h: a gradient check for each, in
// float64 against central differences, on inputs kept away from the kinks at 0, and what
// each does with an integer or Bool input (PyTorch's answer). Their forward values against
// reference loops, in every float dtype, are part of test_elementwise.cpp's unary cases
// (they run on the same elementwise engine).
#include <gtest/gtest.h>

#include "core/ops.h"
#include "tests/gradcheck.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

using testing::all_close;
using testing::all_equal;
using testing::gradcheck;
using testing::uniform_leaf;
using Inputs = std::vector<Tensor>;

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
