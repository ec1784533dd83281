// Tensor::set_data (Note [Set data]): every handle to the impl sees the new data, the
// autograd state stays, the version counter becomes the source storage's, and backward
// still works.
#include <gtest/gtest.h>

#include "core/ops.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

using testing::all_close;

TEST(SetData, EveryHandleSeesTheNewDataAndAutogradStateStays) {
  Tensor param = ones({2, 3}).requires_grad_(true);
  const Tensor handle = param;  // e.g. a layer's member, an optimizer's list
  param.set_data(full({3, 2}, 2.5, {.dtype = DType::Float64}));
  EXPECT_EQ(handle.dtype(), DType::Float64);
  EXPECT_EQ(handle.sizes(), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(handle.numel(), 6);  // Note [Cached layout]: refreshed with the sizes
  EXPECT_TRUE(handle.requires_grad());
  EXPECT_TRUE(handle.is_leaf());
  EXPECT_TRUE(all_close(handle, full({3, 2}, 2.5, {.dtype = DType::Float64})));
  sum(mul(handle, handle)).backward();
  EXPECT_TRUE(all_close(param.grad(), full({3, 2}, 5.0, {.dtype = DType::Float64})));
}

// The element count and contiguity follow the new sizes and strides (Note [Cached layout]).
TEST(SetData, TheLayoutFollowsTheNewData) {
  Tensor target = zeros({2, 3});
  target.set_data(zeros({4, 5}).transpose(0, 1));
  EXPECT_EQ(target.numel(), 20);
  EXPECT_FALSE(target.is_contiguous());
  target.set_data(zeros({0, 7}));
  EXPECT_EQ(target.numel(), 0);
  EXPECT_TRUE(target.is_contiguous());
}

TEST(SetData, SharesTheSourceStorage) {
  Tensor target = zeros({4});
  Tensor source = arange(4.0);
  target.set_data(source);
  source.fill_(7.0);
  EXPECT_TRUE(all_close(target, full({4}, 7.0)));
  EXPECT_EQ(target.version(), source.version());  // one counter per storage: fill_ counted once
  EXPECT_EQ(target.version(), 1u);
  EXPECT_KILN_ERROR(target.set_data(Tensor()), "set_data", "undefined");
  EXPECT_KILN_ERROR(target.set_data(target), "set_data");
}

// A tensor saved for backward keeps the storage it was saved with: set_data afterwards is
// not an in-place write to it, and the gradient uses the values the forward used.
TEST(SetData, ASavedTensorKeepsItsValues) {
  Tensor w = full({3}, 2.0).requires_grad_(true);
  Tensor x = full({3}, 3.0).requires_grad_(true);
  Tensor y = sum(mul(w, x));  // saves w for x's gradient
  w.set_data(full({3}, 5.0));
  y.backward();
  EXPECT_TRUE(all_close(x.grad(), full({3}, 2.0)));
}

}  // namespace
}  // namespace kiln
