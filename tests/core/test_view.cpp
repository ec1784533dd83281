// Views: values against index arithmetic done by hand, storage sharing, the version
// counter shared with the base, error messages, and a gradient check per view op.
#include <gtest/gtest.h>

#include "core/ops.h"
#include "tests/gradcheck.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

using testing::all_equal;
using testing::gradcheck;
using testing::non_contiguous;
using testing::random_nonzero;
using Inputs = std::vector<Tensor>;

// 0, 1, 2, ... as float64 in `sizes`.
Tensor iota(const std::vector<int64_t>& sizes) {
  return arange(checked_numel(sizes, "iota"), {.dtype = DType::Float64}).reshape(sizes);
}

TEST(View, ViewsShareStorageAndVersion) {
  Tensor base = iota({2, 3, 4});
  const std::vector<Tensor> views = {base.view({6, 4}), base.permute({2, 0, 1}), base.transpose(0, 1),
                                     base.narrow(1, 1, 2), base.slice(2, 0, 4, 2), base.select(0, 1),
                                     base.unsqueeze(1).expand({2, 5, 3, 4}), base.flatten(), base.unsqueeze(0).squeeze()};
  for (const Tensor& v : views) {
    EXPECT_TRUE(v.storage().is_alias_of(base.storage()));
  }
  const uint32_t before = views[1].version();
  base.add_(ones({4}, {.dtype = DType::Float64}));
  EXPECT_GT(views[1].version(), before);
  EXPECT_EQ(views[5].to_vector<double>()[0], 13.0);  // base[1][0][0] = 12 + 1
}

TEST(View, PermuteTransposeValues) {
  const Tensor x = iota({2, 3, 4});
  const Tensor p = x.permute({2, 0, 1});
  EXPECT_EQ(p.sizes(), (std::vector<int64_t>{4, 2, 3}));
  const std::vector<double> pv = p.to_vector<double>();
  for (int64_t k = 0; k < 4; ++k)
    for (int64_t i = 0; i < 2; ++i)
      for (int64_t j = 0; j < 3; ++j) EXPECT_EQ(pv[(k * 2 + i) * 3 + j], double(i * 12 + j * 4 + k));
  EXPECT_TRUE(all_equal(x.transpose(0, 2), x.permute({2, 1, 0})));
  EXPECT_TRUE(all_equal(x.transpose(-1, 0), x.permute({2, 1, 0})));
  EXPECT_TRUE(all_equal(iota({2, 3}).t(), iota({2, 3}).transpose(0, 1)));
}

TEST(View, SliceNarrowSelectValues) {
  const Tensor x = iota({4, 6});
  EXPECT_TRUE(all_equal(x.slice(1, 1, 6, 2), tensor<double>({1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23}, {4, 3})));
  EXPECT_TRUE(all_equal(x.slice(0, -2, std::nullopt), tensor<double>({12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23}, {2, 6})));
  EXPECT_EQ(x.slice(0, 10, 20).sizes(), (std::vector<int64_t>{0, 6}));  // clamped, empty
  EXPECT_EQ(x.slice(1, 0, 6, 4).sizes(), (std::vector<int64_t>{4, 2}));
  EXPECT_TRUE(all_equal(x.narrow(0, 1, 2).select(1, -1), tensor<double>({11, 17})));
  EXPECT_TRUE(all_equal(x.select(0, 2), tensor<double>({12, 13, 14, 15, 16, 17})));
}

TEST(View, ReshapeViewsWhenPossibleAndCopiesOtherwise) {
  const Tensor x = iota({2, 3, 4});
  const Tensor r = x.reshape({4, -1});
  EXPECT_EQ(r.sizes(), (std::vector<int64_t>{4, 6}));
  EXPECT_TRUE(r.storage().is_alias_of(x.storage()));
  const Tensor t = x.transpose(1, 2);           // [2, 4, 3], not viewable as [8, 3]? it is: dims 0 and 1 merge
  const Tensor merged = t.reshape({2, 12});     // needs a copy
  EXPECT_FALSE(merged.storage().is_alias_of(x.storage()));
  EXPECT_TRUE(all_equal(merged, t.contiguous().view({2, 12})));
  // Splitting a non-contiguous dim is a view: [2, 4, 3] -> [2, 2, 2, 3].
  EXPECT_TRUE(t.view({2, 2, 2, 3}).storage().is_alias_of(x.storage()));
  EXPECT_TRUE(all_equal(t.view({2, 2, 2, 3}), t.contiguous().view({2, 2, 2, 3})));
  EXPECT_KILN_ERROR(t.view({2, 12}), "view", "not compatible", "reshape");
  EXPECT_KILN_ERROR(x.view({5, -1}), "view", "invalid for input of size 24");
  EXPECT_KILN_ERROR(x.view({-1, -1}), "view", "only one dimension can be -1");
}

TEST(View, ExpandSqueezeUnsqueezeFlatten) {
  const Tensor x = iota({3, 1});
  const Tensor e = x.expand({2, 3, 4});
  EXPECT_EQ(e.strides(), (std::vector<int64_t>{0, 1, 0}));
  EXPECT_TRUE(all_equal(e.contiguous().select(0, 1).select(1, 3), tensor<double>({0, 1, 2})));
  EXPECT_EQ(x.expand({-1, 5}).sizes(), (std::vector<int64_t>{3, 5}));
  EXPECT_KILN_ERROR(x.expand({4, 4}), "expand", "must match the existing size 3");
  EXPECT_KILN_ERROR(x.expand({3}), "expand", "at least the tensor's rank");
  EXPECT_EQ(iota({1, 3, 1, 2}).squeeze().sizes(), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(iota({1, 3, 1, 2}).squeeze(2).sizes(), (std::vector<int64_t>{1, 3, 2}));
  EXPECT_EQ(iota({1, 3, 1, 2}).squeeze(1).sizes(), (std::vector<int64_t>{1, 3, 1, 2}));
  EXPECT_EQ(iota({3}).unsqueeze(-1).sizes(), (std::vector<int64_t>{3, 1}));
  EXPECT_EQ(iota({2, 3, 4, 5}).flatten(1, 2).sizes(), (std::vector<int64_t>{2, 12, 5}));
  EXPECT_EQ(scalar_tensor(1.0).flatten().sizes(), (std::vector<int64_t>{1}));
  EXPECT_KILN_ERROR(iota({2, 3}).flatten(1, 0), "flatten", "start_dim");
}

TEST(View, AsStridedAndItsBounds) {
  const Tensor x = iota({3, 3});
  EXPECT_TRUE(all_equal(x.as_strided({3}, {4}, 0), tensor<double>({0, 4, 8})));
  EXPECT_KILN_ERROR(x.as_strided({3}, {4}, 1), "as_strided", "reaches past the end of its storage (9 elements");
  EXPECT_KILN_ERROR(x.as_strided({2}, {INT64_MAX}, 0), "as_strided", "addresses more than 2^63 - 1 elements");
  EXPECT_KILN_ERROR(x.as_strided({1}, {1}, INT64_MAX), "as_strided", "reaches past the end of its storage");
  EXPECT_KILN_ERROR(x.as_strided({1}, {1}, -1), "as_strided", "negative storage offset -1");
  EXPECT_EQ(x.as_strided({0, 5}, {INT64_MAX, 1}, 9).numel(), 0);  // addresses nothing
  Tensor leaf = iota({2}).requires_grad_(true);
  EXPECT_KILN_ERROR(leaf.as_strided({1}, {1}, 0), "as_strided", "not differentiable");
}

TEST(View, DimensionErrorsNameTheOp) {
  const Tensor x = iota({2, 3});
  EXPECT_KILN_ERROR(x.permute({0, 0}), "permute", "repeats");
  EXPECT_KILN_ERROR(x.permute({0}), "permute", "1 dims given for a 2-d tensor");
  EXPECT_KILN_ERROR(x.transpose(0, 2), "transpose", "dimension 2 out of range");
  EXPECT_KILN_ERROR(x.select(1, 3), "select", "index 3 out of range");
  EXPECT_KILN_ERROR(x.narrow(1, 2, 2), "narrow", "out of range");
  EXPECT_KILN_ERROR(x.slice(0, 0, 1, 0), "slice", "step must be positive");
  EXPECT_KILN_ERROR(scalar_tensor(1.0).select(0, 0), "select", "0-d");
}

// A step near INT64_MAX once overflowed the length computation (end - start + step - 1)
// and made slice(0, 0, 10, INT64_MAX) empty; the stride times the step is checked too.
TEST(View, HugeStepsKeepTheFirstElementAndNeverOverflow) {
  const Tensor x = iota({10});
  for (const int64_t step : {int64_t{10}, int64_t{1} << 32, int64_t{1} << 62, INT64_MAX}) {
    const Tensor s = x.slice(0, 0, 10, step);
    ASSERT_EQ(s.sizes(), (std::vector<int64_t>{1})) << "step " << step;
    EXPECT_EQ(s.item<double>(), 0.0) << "step " << step;
  }
  EXPECT_EQ(x.slice(0, 3, 10, INT64_MAX).item<double>(), 3.0);
  EXPECT_EQ(x.slice(0, 0, 10, 9).sizes(), (std::vector<int64_t>{2}));
  EXPECT_EQ(x.slice(0, 10, 10, INT64_MAX).sizes(), (std::vector<int64_t>{0}));
  // Stride 2 times step 2^62 does not fit int64; the one element left never moves by it,
  // so the stride is kept (a length >= 2 would need a view larger than any storage).
  const Tensor strided = iota({4, 2}).t().slice(1, 1, 4, int64_t{1} << 62);  // stride 2 along dim 1
  EXPECT_EQ(strided.sizes(), (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(strided.strides()[1], 2);
  EXPECT_TRUE(all_equal(strided.contiguous(), tensor<double>({2, 3}, {2, 1})));
  EXPECT_EQ(x.slice(0, 0, 10, 4).strides(), (std::vector<int64_t>{4}));
  EXPECT_KILN_ERROR(x.narrow(0, 2, INT64_MAX), "narrow", "out of range");
  EXPECT_KILN_ERROR(x.narrow(0, 11, 0), "narrow", "out of range");
}


// view and reshape once multiplied the requested sizes unchecked: empty({0}).view({2^32,
// 2^32}) wrapped to 0 elements and was accepted, and select(0, 7) on it then gave 2^32
// elements over a 0-byte storage. Sizes are now multiplied with overflow checks, and no
// view may reach past its storage (Note [Checked sizes]).
TEST(View, ImpossibleShapesAreErrors) {
  const int64_t two32 = int64_t{1} << 32;
  const Tensor none = empty({0});
  EXPECT_KILN_ERROR(none.view({two32, two32}), "view: shape [4294967296, 4294967296] has more than 2^63 - 1 elements");
  EXPECT_KILN_ERROR(none.reshape({two32, two32}), "reshape", "more than 2^63 - 1 elements");
  EXPECT_KILN_ERROR(none.view({two32, two32, -1}), "view", "more than 2^63 - 1 elements");
  EXPECT_KILN_ERROR(none.view({0, -1}), "view: shape [0, -1] is invalid for input of size 0");
  EXPECT_KILN_ERROR(iota({4}).view({INT64_MAX, 2, -1}), "view: shape [9223372036854775807, 2, -1] has more than");
  // A zero among the sizes makes any others harmless: PyTorch accepts these too.
  const Tensor zero_view = none.view({two32, 0, two32});
  EXPECT_EQ(zero_view.numel(), 0);
  EXPECT_EQ(zero_view.select(0, 7).sizes(), (std::vector<int64_t>{0, two32}));
  EXPECT_EQ(zero_view.select(2, two32 - 1).numel(), 0);
  EXPECT_NO_THROW(zero_view.select(0, 7).fill_(1));
  // Expanding a one-element tensor to 2^62 elements is a valid (stride-0) view; beyond
  // 2^63 - 1 elements it is not.
  const Tensor one = iota({1});
  EXPECT_EQ(one.expand({int64_t{1} << 62}).numel(), int64_t{1} << 62);
  EXPECT_KILN_ERROR(one.expand({two32, two32}), "expand", "more than 2^63 - 1 elements");
  EXPECT_KILN_ERROR(one.expand({INT64_MAX, 2}), "expand", "more than 2^63 - 1 elements");
  // Flattening dims whose product overflows beside a zero-size dim.
  EXPECT_KILN_ERROR(empty({0, two32, two32}).flatten(1, 2), "flatten", "more than 2^63 - 1 elements");
  EXPECT_EQ(empty({0, two32, two32}).flatten(0, 1).sizes(), (std::vector<int64_t>{0, two32}));
}

// A view's largest reachable element is checked against its storage when it is made, so
// no sequence of views can address memory it does not own.
TEST(View, ViewsNeverReachPastTheirStorage) {
  const Tensor x = iota({2, 3});
  const Tensor row = x.select(0, 1);
  EXPECT_EQ(row.storage_offset(), 3);
  EXPECT_TRUE(all_equal(row.as_strided({3}, {1}, 3), tensor<double>({3, 4, 5})));
  EXPECT_KILN_ERROR(row.as_strided({3}, {1}, 4), "as_strided", "reaches past the end of its storage (6 elements");
  EXPECT_TRUE(all_equal(row.as_strided({2, 2}, {3, 1}, 0), tensor<double>({0, 1, 3, 4}, {2, 2})));
  EXPECT_KILN_ERROR(row.as_strided({2, 2}, {3, 1}, 3), "as_strided", "reaches past the end");
  // An empty slice at the end keeps its base's offset: start * stride with start == size
  // would point past the last element (and past int64 for a huge stride).
  const Tensor huge_stride = empty_strided({1}, {INT64_MAX});
  EXPECT_EQ(huge_stride.slice(0, 1, 1).numel(), 0);
  EXPECT_EQ(huge_stride.slice(0, 1, 1).storage_offset(), 0);
  EXPECT_EQ(x.slice(1, 3, 3).sizes(), (std::vector<int64_t>{2, 0}));
}


KILN_GRADCHECK_TEST(view) {
  EXPECT_TRUE(gradcheck([](const Inputs& v) { return v[0].view({6, 2}); }, {testing::grad_leaf({3, 4}, 1)}));
}

KILN_GRADCHECK_TEST(reshape) {
  EXPECT_TRUE(gradcheck([](const Inputs& v) { return v[0].reshape({-1}); }, {testing::strided_grad_leaf({3, 4}, 1)}));
  EXPECT_TRUE(gradcheck([](const Inputs& v) { return v[0].t().reshape({2, 6}); }, {testing::grad_leaf({3, 4}, 2)}));
}

KILN_GRADCHECK_TEST(permute) {
  EXPECT_TRUE(gradcheck([](const Inputs& v) { return v[0].permute({1, 2, 0}); }, {testing::strided_grad_leaf({2, 3, 2}, 1)}));
}

KILN_GRADCHECK_TEST(transpose) {
  EXPECT_TRUE(gradcheck([](const Inputs& v) { return v[0].transpose(0, 1); }, {testing::grad_leaf({2, 3}, 1)}));
}

KILN_GRADCHECK_TEST(narrow) {
  EXPECT_TRUE(gradcheck([](const Inputs& v) { return v[0].narrow(1, 1, 2); }, {testing::strided_grad_leaf({3, 4}, 1)}));
}

KILN_GRADCHECK_TEST(slice) {
  EXPECT_TRUE(gradcheck([](const Inputs& v) { return v[0].slice(1, 1, std::nullopt, 2); }, {testing::grad_leaf({3, 6}, 1)}));
}

KILN_GRADCHECK_TEST(select) {
  EXPECT_TRUE(gradcheck([](const Inputs& v) { return v[0].select(0, -1); }, {testing::strided_grad_leaf({3, 4}, 1)}));
}

KILN_GRADCHECK_TEST(expand) {
  EXPECT_TRUE(gradcheck([](const Inputs& v) { return v[0].expand({2, 3, 4}); }, {testing::grad_leaf({3, 1}, 1)}));
}

KILN_GRADCHECK_TEST(squeeze) {
  EXPECT_TRUE(gradcheck([](const Inputs& v) { return v[0].squeeze(); }, {testing::grad_leaf({3, 1, 2}, 1)}));
  EXPECT_TRUE(gradcheck([](const Inputs& v) { return v[0].squeeze(1); }, {testing::grad_leaf({3, 1, 2}, 2)}));
}

KILN_GRADCHECK_TEST(unsqueeze) {
  EXPECT_TRUE(gradcheck([](const Inputs& v) { return v[0].unsqueeze(1); }, {testing::strided_grad_leaf({3, 2}, 1)}));
}

KILN_GRADCHECK_TEST(flatten) {
  EXPECT_TRUE(gradcheck([](const Inputs& v) { return v[0].flatten(); }, {testing::strided_grad_leaf({2, 3, 2}, 1)}));
}

}  // namespace
}  // namespace kiln
