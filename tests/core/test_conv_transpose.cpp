// conv_transpose1d/2d/3d and conv_transpose: outputs and the gradients of input, weight and
// bias equal PyTorch's (tests/core/conv_transpose/make_fixtures.py, torch 2.15) for
// strides, padding, output_padding below the stride and between the stride and the
// dilation (the cropped path), dilation and groups in 1-3 spatial dims; the transposed
// convolution is the adjoint of the convolution (<conv(y), x> = <y, conv_transpose(x)>)
// in every float dtype; non-contiguous and unbatched inputs, an empty batch, autocast;
// float64 gradient checks; every argument error.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/ops.h"
#include "data/npz.h"
#include "tests/gradcheck.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

using testing::all_close;
using testing::gradcheck;
using testing::random_nonzero;

struct Case {
  std::string name;
  std::vector<int64_t> stride = {1}, padding = {0}, output_padding = {0};
  int64_t groups = 1;
  std::vector<int64_t> dilation = {1};
};

// The fixture's cases, with the arguments make_fixtures.py gave PyTorch.
const std::vector<Case> kCases = {
    {"plain1d"},
    {"strided1d", {3}, {1}, {2}},
    {"groups2d", {2, 1}, {1, 0}, {0}, 2},
    {"dilated2d", {2}, {2}, {1}, 1, {2, 3}},
    {"cropped2d", {1}, {1, 0}, {2, 1}, 1, {3, 2}},
    {"up3d", {2}},
    {"general3d", {2, 1, 3}, {1, 0, 2}, {1, 0, 2}, 2, {1, 2, 1}},
};

Tensor run(const Case& c, const Tensor& x, const Tensor& w, const Tensor& b) {
  return conv_transpose(x, w, b, c.stride, c.padding, c.output_padding, c.groups, c.dilation);
}

TEST(ConvTranspose, OutputsAndGradientsMatchPyTorch) {
  const data::npz::File fixture(std::string(KILN_SOURCE_DIR) +
                                "/tests/core/conv_transpose/conv_transpose.npz");
  const testing::Tolerance tol{1e-12, 1e-12};
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.name);
    const auto load = [&](const std::string& key) { return fixture.load(c.name + "_" + key); };
    const Tensor x = load("input").detach().requires_grad_(true);
    const Tensor w = load("weight").detach().requires_grad_(true);
    const Tensor b = load("bias").detach().requires_grad_(true);
    const Tensor y = run(c, x, w, b);
    EXPECT_TRUE(all_close(y, load("output"), tol));
    mul(y, load("weights")).sum().backward();
    EXPECT_TRUE(all_close(x.grad(), load("grad_input"), tol));
    EXPECT_TRUE(all_close(w.grad(), load("grad_weight"), tol));
    EXPECT_TRUE(all_close(b.grad(), load("grad_bias"), tol));
  }
}

TEST(ConvTranspose, FrontDoorsAreTheNdOp) {
  const Tensor x = random_nonzero({2, 4, 3, 5}, DType::Float64);
  const Tensor w = random_nonzero({4, 3, 2, 3}, DType::Float64);
  const Tensor b = random_nonzero({6}, DType::Float64);
  EXPECT_TRUE(testing::all_equal(conv_transpose2d(x, w, b, {2}, {1}, {1}, 2),
                                 conv_transpose(x, w, b, {2}, {1}, {1}, 2, {1})));
  const Tensor x1 = random_nonzero({2, 4, 5}, DType::Float64);
  const Tensor w1 = random_nonzero({4, 3, 3}, DType::Float64);
  EXPECT_TRUE(
      testing::all_equal(conv_transpose1d(x1, w1), conv_transpose(x1, w1, {}, {1}, {0}, {0}, 1, {1})));
}

// <conv(y, W), x> = <y, conv_transpose(x, W)> for every y, x: the transposed convolution is
// the convolution's adjoint, in every dtype (half types within their rounding).
TEST(ConvTranspose, IsTheAdjointOfConvolutionInEveryDtype) {
  for (DType dtype : {DType::Float64, DType::Float32, DType::Float16, DType::BFloat16}) {
    SCOPED_TRACE(dtype_name(dtype));
    const Tensor w = random_nonzero({6, 2, 3, 2, 3}, DType::Float64);  // conv: C_out 6, C_in 4, groups 2
    const Tensor x = random_nonzero({2, 6, 3, 4, 2}, DType::Float64);  // conv's output shape
    const Tensor y = random_nonzero({2, 4, 6, 5, 5}, DType::Float64);  // conv's input shape
    const std::vector<int64_t> stride = {2, 1, 2}, padding = {1, 0, 1}, dilation = {1, 1, 2};
    const Tensor t = conv_transpose3d(x.to(dtype), w.to(dtype), {}, stride, padding, {1, 0, 0}, 2, dilation);
    ASSERT_EQ(t.sizes(), y.sizes());
    EXPECT_EQ(t.dtype(), dtype);
    const Tensor c = conv3d(y, w, {}, stride, padding, dilation, 2);
    ASSERT_EQ(c.sizes(), x.sizes());
    const double lhs = mul(c, x).sum().item<double>();
    const double rhs = mul(y, t.to(DType::Float64)).sum().item<double>();
    const double scale = mul(c.abs(), x.abs()).sum().item<double>();
    const double tolerance = dtype == DType::Float64 ? 1e-12 : dtype == DType::Float32 ? 1e-5 : 2e-2;
    EXPECT_NEAR(lhs, rhs, tolerance * scale);
  }
}

TEST(ConvTranspose, NonContiguousAndUnbatchedInputsGiveTheSameResult) {
  const Tensor x = random_nonzero({2, 3, 4, 5}, DType::Float32);
  const Tensor w = random_nonzero({3, 2, 3, 3}, DType::Float32);
  const Tensor b = random_nonzero({2}, DType::Float32);
  const Tensor expected = conv_transpose2d(x, w, b, {2}, {1}, {1});
  const Tensor x_strided = x.transpose(2, 3).contiguous().transpose(2, 3);
  const Tensor w_strided = w.transpose(0, 1).contiguous().transpose(0, 1);
  ASSERT_FALSE(x_strided.is_contiguous());
  EXPECT_TRUE(testing::all_equal(conv_transpose2d(x_strided, w_strided, b, {2}, {1}, {1}), expected));
  const Tensor one = conv_transpose2d(x.select(0, 1), w, b, {2}, {1}, {1});
  EXPECT_EQ(one.sizes(), (std::vector<int64_t>{2, 8, 10}));
  EXPECT_TRUE(testing::all_equal(one, expected.select(0, 1)));
}

TEST(ConvTranspose, EmptyBatchGivesEmptyOutputAndZeroWeightGradient) {
  const Tensor x = zeros({0, 2, 3, 3, 3}).requires_grad_(true);
  const Tensor w = random_nonzero({2, 4, 2, 2, 2}, DType::Float32).requires_grad_(true);
  const Tensor y = conv_transpose3d(x, w, {}, {2});
  EXPECT_EQ(y.sizes(), (std::vector<int64_t>{0, 4, 6, 6, 6}));
  y.sum().backward();
  EXPECT_TRUE(testing::all_equal(w.grad(), zeros({2, 4, 2, 2, 2})));
  EXPECT_EQ(x.grad().sizes(), x.sizes());
}

TEST(ConvTranspose, RunsInTheAutocastDtype) {
  const Tensor x = random_nonzero({1, 2, 3, 3}, DType::Float32);
  const Tensor w = random_nonzero({2, 2, 2, 2}, DType::Float32);
  AutocastGuard autocast(DType::BFloat16);
  EXPECT_EQ(conv_transpose2d(x, w, {}, {2}).dtype(), DType::BFloat16);
}

TEST(ConvTranspose, ArgumentErrorsNameTheOpAndTheOffendingValues) {
  const Tensor x = random_nonzero({2, 4, 5, 5}, DType::Float32);
  const Tensor w = random_nonzero({4, 3, 3, 3}, DType::Float32);  // C_out = 3 x groups
  EXPECT_KILN_ERROR(conv_transpose2d(x, random_nonzero({4, 3, 3}, DType::Float32)), "conv_transpose2d",
                    "4-d weight", "[4, 3, 3]");
  EXPECT_KILN_ERROR(conv_transpose(x, random_nonzero({4, 3}, DType::Float32), {}, {1}, {0}, {0}, 1, {1}),
                    "conv_transpose", "1-3 spatial dims");
  EXPECT_KILN_ERROR(conv_transpose2d(x, random_nonzero({3, 3, 3, 3}, DType::Float32)), "conv_transpose2d",
                    "expects C_in = 3", "has 4", "[C_in, C_out / groups, k...]");
  EXPECT_KILN_ERROR(conv_transpose2d(x, w, {}, {1}, {0}, {0}, 3), "C_in = 4", "divisible by groups = 3");
  EXPECT_KILN_ERROR(conv_transpose2d(x, w, {}, {1}, {0}, {0}, 0), "groups must be positive");
  EXPECT_KILN_ERROR(conv_transpose2d(x, w, {}, {0}), "stride must be positive");
  EXPECT_KILN_ERROR(conv_transpose2d(x, w, {}, {1}, {-1}), "padding must be non-negative");
  EXPECT_KILN_ERROR(conv_transpose2d(x, w, {}, {1}, {0}, {-1}), "output_padding must be non-negative");
  EXPECT_KILN_ERROR(conv_transpose2d(x, w, {}, {2}, {0}, {2}), "output_padding [2, 2]",
                    "smaller than either the stride [2, 2] or the dilation [1, 1]");
  EXPECT_KILN_ERROR(conv_transpose2d(x, w, {}, {1}, {0}, {0, 0, 0}), "output_padding", "1 or 2 values");
  EXPECT_KILN_ERROR(conv_transpose2d(x, w, {}, {1}, {4}), "output would be empty", "= -1");
  EXPECT_KILN_ERROR(conv_transpose2d(x, w, {}, {INT64_MAX / 2}), "overflows int64");
  EXPECT_KILN_ERROR(conv_transpose2d(x, w, random_nonzero({4}, DType::Float32)), "bias must have shape [3]");
  EXPECT_KILN_ERROR(conv_transpose2d(x, w, random_nonzero({6}, DType::Float32), {1}, {0}, {0}, 1),
                    "bias must have shape [3]");
  EXPECT_KILN_ERROR(conv_transpose2d(x, w.to(DType::Float64)), "same dtype");
  EXPECT_KILN_ERROR(conv_transpose2d(x.to(DType::Int64), w.to(DType::Int64)), "floating-point");
  EXPECT_KILN_ERROR(conv_transpose2d(zeros({2, 4, 0, 5}), w), "non-zero", "[2, 4, 0, 5]");
  EXPECT_KILN_ERROR(conv_transpose3d(x, w), "conv_transpose3d", "5-d weight");
  EXPECT_KILN_ERROR(conv_transpose2d(Tensor(), w), "undefined");
  if (!cuda_is_available()) {
    EXPECT_KILN_ERROR(conv_transpose2d(x, w.to(Device::cuda())), "CUDA is not available");
  }
}

// ---- gradient checks (float64, central differences) -----------------------------------

using Inputs = std::vector<Tensor>;
using testing::grad_leaf;
using testing::strided_grad_leaf;

KILN_GRADCHECK_TEST(conv_transpose1d) {
  EXPECT_TRUE(
      gradcheck([](const Inputs& v) { return conv_transpose1d(v[0], v[1], v[2], {2}, {1}, {1}, 2, {2}); },
                {grad_leaf({2, 4, 5}, 1), grad_leaf({4, 3, 3}, 2), grad_leaf({6}, 3)}));
  EXPECT_TRUE(gradcheck([](const Inputs& v) { return conv_transpose1d(v[0], v[1]); },
                        {strided_grad_leaf({3, 4}, 4), strided_grad_leaf({3, 2, 2}, 5)}));
}

KILN_GRADCHECK_TEST(conv_transpose2d) {
  EXPECT_TRUE(gradcheck(
      [](const Inputs& v) {
        return conv_transpose2d(v[0], v[1], v[2], {2, 1}, {1, 0}, {1, 0}, 2, {1, 2});
      },
      {grad_leaf({2, 4, 3, 4}, 6), grad_leaf({4, 2, 3, 2}, 7), grad_leaf({4}, 8)}));
  // stride <= output_padding < dilation: the cropped path.
  EXPECT_TRUE(
      gradcheck([](const Inputs& v) { return conv_transpose2d(v[0], v[1], v[2], {1}, {1}, {2}, 1, {3}); },
                {strided_grad_leaf({1, 2, 3, 3}, 9), grad_leaf({2, 2, 2, 2}, 10), grad_leaf({2}, 11)}));
}

KILN_GRADCHECK_TEST(conv_transpose3d) {
  EXPECT_TRUE(
      gradcheck([](const Inputs& v) { return conv_transpose3d(v[0], v[1], v[2], {2}); },
                {grad_leaf({2, 3, 2, 3, 2}, 12), grad_leaf({3, 2, 2, 2, 2}, 13), grad_leaf({2}, 14)}));
  EXPECT_TRUE(gradcheck(
      [](const Inputs& v) {
        return conv_transpose3d(v[0], v[1], {}, {1, 2, 1}, {1});
      },
      {strided_grad_leaf({2, 3, 3, 3}, 15), grad_leaf({2, 3, 3, 2, 3}, 16)}));
}

KILN_GRADCHECK_TEST(conv_transpose) {
  EXPECT_TRUE(
      gradcheck([](const Inputs& v) { return conv_transpose(v[0], v[1], v[2], {2}, {0}, {1}, 1, {1}); },
                {grad_leaf({1, 2, 3, 2}, 17), grad_leaf({2, 3, 2, 2}, 18), grad_leaf({3}, 19)}));
}

}  // namespace
}  // namespace kiln
