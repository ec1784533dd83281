// Tensor::set_data (Note [Set data]): every handle to the impl sees the new data, the
// autograd state stays, the version counter is bumped, and backward still works.
#include <gtest/gtest.h>

#include "core/ops.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

using testing::all_close;

TEST(SetData, EveryHandleSeesTheNewDataAndAutogradStateStays) {
  Tensor param = ones({2, 3}).requires_grad_(true);
  const Tensor handle = param;  // e.g. a layer's member, an optimizer's list
  const uint32_t version = param.version();
  param.set_data(full({3, 2}, 2.5, {.dtype = DType::Float64}));
  EXPECT_EQ(handle.dtype(), DType::Float64);
  EXPECT_EQ(handle.sizes(), (std::vector<int64_t>{3, 2}));
  EXPECT_TRUE(handle.requires_grad());
  EXPECT_TRUE(handle.is_leaf());
  EXPECT_GT(param.version(), version);
  EXPECT_TRUE(all_close(handle, full({3, 2}, 2.5, {.dtype = DType::Float64})));
  sum(mul(handle, handle)).backward();
  EXPECT_TRUE(all_close(param.grad(), full({3, 2}, 5.0, {.dtype = DType::Float64})));
}

TEST(SetData, SharesTheSourceStorage) {
  Tensor target = zeros({4});
  Tensor source = arange(4.0);
  target.set_data(source);
  source.fill_(7.0);
  EXPECT_TRUE(all_close(target, full({4}, 7.0)));
  EXPECT_KILN_ERROR(target.set_data(Tensor()), "set_data", "undefined");
  EXPECT_KILN_ERROR(target.set_data(target), "set_data");
}

}  // namespace
}  // namespace kiln
