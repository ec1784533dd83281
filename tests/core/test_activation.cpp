// The activation functions of core/ops/activation.h: a gradient check for each, in
// float64 against central differences, on inputs kept away from the kinks at 0. Their
// forward values against reference loops, in every float dtype, are part of
// test_elementwise.cpp's unary cases (they run on the same elementwise engine).
#include <gtest/gtest.h>

#include "core/ops.h"
#include "tests/gradcheck.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

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

}  // namespace
}  // namespace kiln
