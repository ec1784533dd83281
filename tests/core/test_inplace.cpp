// In-place ops (add_, mul_, sub_, div_, clamp_, zero_, fill_) and the rule of
// core/ops/inplace.h that guards them (Note [In-place and autograd]): results written into
// self's storage, through views too, with the version bumped; a leaf that requires grad
// or a view of a recorded result refused while recording, allowed under NoGradGuard; and
// the gradient through an in-place op on a non-leaf, with itself as operand included.
#include <gtest/gtest.h>

#include "core/ops.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

using testing::all_equal;

Tensor leaf(std::vector<double> values) { return tensor(values).requires_grad_(true); }

TEST(Elementwise, InPlaceOpsWriteIntoSelfAndBumpTheVersion) {
  Tensor x = tensor<double>({1, 2, 3, 4}, {2, 2});
  const void* storage = x.data_ptr();
  const uint32_t v0 = x.version();
  x.add_(tensor<double>({10, 20}));
  x.mul_(2.0);
  x.sub_(tensor<double>({1}), 3);
  x.div_(tensor<double>({2}));
  EXPECT_EQ(x.data_ptr(), storage);
  EXPECT_GT(x.version(), v0);
  EXPECT_TRUE(all_equal(x, tensor<double>({9.5, 20.5, 11.5, 22.5}, {2, 2})));
  x.clamp_(10, 20);
  EXPECT_TRUE(all_equal(x, tensor<double>({10, 20, 11.5, 20}, {2, 2})));
  x.zero_();
  EXPECT_TRUE(all_equal(x, zeros({2, 2}, {.dtype = DType::Float64})));
  // Through a non-contiguous view: only the viewed elements change.
  Tensor base = zeros({2, 3}, {.dtype = DType::Float64});
  Tensor column = base.select(1, 1);
  column.fill_(5);
  EXPECT_TRUE(all_equal(base, tensor<double>({0, 5, 0, 0, 5, 0}, {2, 3})));
}

// PyTorch's rule for in-place results (torch.can_cast): self keeps its dtype, and a result
// it cannot hold without changing category is an error, never a silent truncation.
TEST(Elementwise, InPlaceResultMustCastToSelfsDtype) {
  Tensor i = tensor<int64_t>({4, 6});
  EXPECT_KILN_ERROR(i.div_(tensor<int64_t>({2, 4})), "div_",
                    "result type float32 can't be cast to the desired output type int64");
  EXPECT_KILN_ERROR(i.add_(tensor<float>({1, 1})), "add_", "result type float32 can't be cast", "int64");
  EXPECT_KILN_ERROR(i.mul_(2.5), "mul_", "result type float32 can't be cast", "int64");
  EXPECT_TRUE(all_equal(i, tensor<int64_t>({4, 6})));  // nothing written
  Tensor flags = tensor<bool>({true, false});
  EXPECT_KILN_ERROR(flags.add_(tensor<int64_t>({1, 1})), "add_", "result type int64 can't be cast", "bool");
  i.mul_(3).add_(tensor<int32_t>({1, 1}));  // integer results fit
  EXPECT_TRUE(all_equal(i, tensor<int64_t>({13, 19})));
  Tensor h = tensor<double>({1, 2}).to(DType::Float16);
  h.div_(tensor<int64_t>({2, 4}));  // a float16 result of float16 / int64 fits
  EXPECT_TRUE(all_equal(h, tensor<double>({0.5, 0.5}).to(DType::Float16)));
}

TEST(Autograd, InPlaceRules) {
  Tensor w = leaf({1, 2});
  EXPECT_KILN_ERROR(w.add_(tensor<double>({1, 1})), "add_", "leaf");
  {
    NoGradGuard no_grad;
    w.add_(tensor<double>({1, 1}));  // optimizer-style update is fine
  }
  EXPECT_TRUE(all_equal(w.detach(), tensor<double>({2, 3})));
  Tensor y = mul(w, 1.0);
  EXPECT_KILN_ERROR(y.select(0, 0).mul_(2.0), "mul_", "view");
}

TEST(Autograd, InPlaceOnANonLeafRecordsTheRightGradient) {
  Tensor x = leaf({1, 2, 3});
  Tensor y = mul(x, 2.0);
  y.mul_(x);       // y = 2x^2: the gradient for x needs the old y (cloned before overwrite)
  y.add_(x, 3.0);  // y = 2x^2 + 3x
  y.sum().backward();
  EXPECT_TRUE(all_equal(x.grad(), tensor<double>({7, 11, 15})));  // 4x + 3
}

TEST(Autograd, InPlaceWithItselfAsOperandKeepsTheOldValues) {
  Tensor x = leaf({1, 2, 3});
  Tensor y = mul(x, 2.0);
  y.mul_(y);  // y = 4x^2: both operands are the old y, cloned before the overwrite
  y.sum().backward();
  EXPECT_TRUE(all_equal(x.grad(), tensor<double>({8, 16, 24})));
}

}  // namespace
}  // namespace kiln
