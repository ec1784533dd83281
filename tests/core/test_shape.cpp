// cat, stack, split, split_with_sizes, chunk and meshgrid: values against hand-built
// results, promotion, views, errors and gradient checks.
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

Tensor iota(const std::vector<int64_t>& sizes, double start = 0) {
  return add(arange(checked_numel(sizes, "iota"), {.dtype = DType::Float64}), start).reshape(sizes);
}

TEST(Shape, CatAlongEachDimMatchesHandBuiltResult) {
  const Tensor a = iota({2, 3}), b = iota({2, 2}, 100);
  const Tensor got = cat({a, b}, -1);
  EXPECT_TRUE(all_equal(got, tensor<double>({0, 1, 2, 100, 101, 3, 4, 5, 102, 103}, {2, 5})));
  EXPECT_TRUE(all_equal(cat({a, iota({1, 3}, 50)}, 0), tensor<double>({0, 1, 2, 3, 4, 5, 50, 51, 52}, {3, 3})));
  EXPECT_TRUE(all_equal(cat({non_contiguous(a), a.t().contiguous().t()}, 0), cat({a, a}, 0)));
}

TEST(Shape, CatPromotesAndSkipsLegacyEmptyTensors) {
  const Tensor i = tensor<int32_t>({1, 2}), f = tensor<float>({0.5f});
  const Tensor got = cat({i, f, zeros({0}, {.dtype = DType::Float64})});
  EXPECT_EQ(got.dtype(), DType::Float64);
  EXPECT_TRUE(all_equal(got, tensor<double>({1, 2, 0.5})));
  EXPECT_TRUE(all_equal(cat({zeros({0}), iota({2, 2})}, 1), iota({2, 2}).to(DType::Float64)));
  EXPECT_EQ(cat({zeros({0, 3}), zeros({2, 3})}).sizes(), (std::vector<int64_t>{2, 3}));
}

TEST(Shape, StackSplitChunk) {
  const Tensor a = iota({2, 3}), b = iota({2, 3}, 10);
  EXPECT_EQ(stack({a, b}).sizes(), (std::vector<int64_t>{2, 2, 3}));
  EXPECT_TRUE(all_equal(stack({a, b}, 2).select(2, 1), b));
  EXPECT_TRUE(all_equal(stack({a, b}, -1).select(-1, 0), a));
  const Tensor x = iota({7, 2});
  const std::vector<Tensor> pieces = split(x, 3);
  ASSERT_EQ(pieces.size(), 3u);
  EXPECT_EQ(pieces[2].sizes(), (std::vector<int64_t>{1, 2}));
  EXPECT_TRUE(pieces[1].storage().is_alias_of(x.storage()));
  EXPECT_TRUE(all_equal(pieces[1], x.narrow(0, 3, 3)));
  const std::vector<Tensor> sized = split_with_sizes(x, {2, 0, 5});
  EXPECT_EQ(sized[1].size(0), 0);
  EXPECT_TRUE(all_equal(sized[2], x.narrow(0, 2, 5)));
  EXPECT_EQ(chunk(x, 3).size(), 3u);     // ceil(7 / 3) = 3 per piece: 3, 3, 1
  EXPECT_EQ(chunk(x, 10).size(), 7u);    // more chunks than rows
  EXPECT_EQ(chunk(iota({6}), 4).size(), 3u);  // ceil(6 / 4) = 2: 2, 2, 2
  EXPECT_TRUE(all_equal(cat(chunk(x, 3)), x));
}

TEST(Shape, MeshgridIjAndXy) {
  const Tensor x = tensor<double>({1, 2, 3}), y = tensor<double>({4, 5});
  const std::vector<Tensor> ij = meshgrid({x, y}, "ij");
  EXPECT_TRUE(all_equal(ij[0], tensor<double>({1, 1, 2, 2, 3, 3}, {3, 2})));
  EXPECT_TRUE(all_equal(ij[1], tensor<double>({4, 5, 4, 5, 4, 5}, {3, 2})));
  const std::vector<Tensor> xy = meshgrid({x, y}, "xy");
  EXPECT_TRUE(all_equal(xy[0], tensor<double>({1, 2, 3, 1, 2, 3}, {2, 3})));
  EXPECT_TRUE(all_equal(xy[1], tensor<double>({4, 4, 4, 5, 5, 5}, {2, 3})));
  EXPECT_EQ(meshgrid({x, y, tensor<double>({7, 8, 9, 10})})[2].sizes(), (std::vector<int64_t>{3, 2, 4}));
}

TEST(Shape, ErrorsNameTheOffendingTensor) {
  EXPECT_KILN_ERROR(cat({}), "cat", "non-empty");
  EXPECT_KILN_ERROR(cat({zeros({2, 3}), zeros({2, 4})}, 0), "cat", "tensor 1", "[2, 4]", "[2, 3]");
  EXPECT_KILN_ERROR(cat({zeros({2, 3}), zeros({3})}, 0), "cat", "tensor 1 has 1 dimensions");
  EXPECT_KILN_ERROR(cat({scalar_tensor(1.0)}), "cat", "zero-dimensional");
  EXPECT_KILN_ERROR(cat({zeros({2})}, 1), "cat", "out of range");
  EXPECT_KILN_ERROR(stack({zeros({2}), zeros({3})}), "stack", "equal size", "entry 1");
  EXPECT_KILN_ERROR(split(zeros({4}), 0), "split", "positive");
  EXPECT_KILN_ERROR(split_with_sizes(zeros({4}), {1, 2}), "split_with_sizes", "add up to 3");
  EXPECT_KILN_ERROR(chunk(zeros({4}), 0), "chunk", "positive");
  EXPECT_KILN_ERROR(meshgrid({zeros({2, 2})}), "meshgrid", "0-d or 1-d");
  EXPECT_KILN_ERROR(meshgrid({zeros({2})}, "yx"), "meshgrid", "indexing");
}



KILN_GRADCHECK_TEST(cat) {
  EXPECT_TRUE(gradcheck([](const Inputs& v) { return cat(v, 1); }, {testing::grad_leaf({2, 3}, 1), testing::strided_grad_leaf({2, 2}, 2)}));
  EXPECT_TRUE(gradcheck([](const Inputs& v) { return cat({v[0], v[1].to(DType::Float32).to(DType::Float64)}, 0); },
                        {testing::grad_leaf({1, 2}, 3), testing::grad_leaf({2, 2}, 4)}, {.eps = 1e-3, .atol = 1e-4, .rtol = 1e-4}));
}

KILN_GRADCHECK_TEST(stack) {
  EXPECT_TRUE(gradcheck([](const Inputs& v) { return stack(v, 1); }, {testing::grad_leaf({2, 3}, 1), testing::strided_grad_leaf({2, 3}, 2)}));
}

KILN_GRADCHECK_TEST(split) {
  EXPECT_TRUE(gradcheck([](const Inputs& v) { return mul(split(v[0], 2, 1)[1], split(v[0], 2, 1)[0]); },
                        {testing::strided_grad_leaf({3, 4}, 1)}));
}

KILN_GRADCHECK_TEST(split_with_sizes) {
  EXPECT_TRUE(gradcheck([](const Inputs& v) { return exp(split_with_sizes(v[0], {1, 3}, 0)[1]); }, {testing::grad_leaf({4, 2}, 1)}));
}

KILN_GRADCHECK_TEST(chunk) {
  EXPECT_TRUE(gradcheck([](const Inputs& v) { return sum(stack(chunk(v[0], 3, 0)), {1}); }, {testing::strided_grad_leaf({6, 2}, 1)}));
}

KILN_GRADCHECK_TEST(meshgrid) {
  EXPECT_TRUE(gradcheck(
      [](const Inputs& v) {
        const std::vector<Tensor> g = meshgrid(v, "xy");
        return mul(g[0], exp(g[1]));
      },
      {testing::grad_leaf({3}, 1), testing::grad_leaf({2}, 2)}));
}

}  // namespace
}  // namespace kiln
