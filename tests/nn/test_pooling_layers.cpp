// Pooling layers against their functional ops (same options, including the default
// stride = kernel_size), output shapes, and their printed form.
#include <gtest/gtest.h>

#include "core/ops.h"
#include "nn/nn.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

using testing::all_equal;
using testing::random_uniform;

TEST(NnPooling, MaxPoolLayersMatchFunctional) {
  const Tensor x1 = random_uniform({2, 3, 9}, -1, 1, DType::Float32, 1);
  const Tensor x2 = random_uniform({2, 3, 6, 7}, -1, 1, DType::Float32, 2);
  const Tensor x3 = random_uniform({2, 3, 4, 6, 5}, -1, 1, DType::Float32, 3);
  EXPECT_TRUE(all_equal(nn::MaxPool1d(nn::MaxPool1dOptions{.kernel_size = {3}}).forward(x1), max_pool1d(x1, {3})));
  EXPECT_TRUE(all_equal(nn::MaxPool2d(nn::MaxPool2dOptions{.kernel_size = {3}, .stride = {2}, .padding = {1}}).forward(x2),
                        max_pool2d(x2, {3}, {2}, {1})));
  nn::MaxPool3d pool3(nn::MaxPool3dOptions{.kernel_size = {2}, .ceil_mode = true});
  const Tensor y3 = pool3.forward(x3);
  EXPECT_EQ(y3.sizes(), (std::vector<int64_t>{2, 3, 2, 3, 3}));
  EXPECT_TRUE(all_equal(y3, max_pool3d(x3, {2}, {}, {0}, {1}, true)));
  EXPECT_EQ(pool3.to_string(), "MaxPool3d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=True)");
}

TEST(NnPooling, AvgPoolLayersMatchFunctional) {
  const Tensor x1 = random_uniform({2, 3, 9}, -1, 1, DType::Float32, 4);
  const Tensor x3 = random_uniform({2, 3, 4, 6, 5}, -1, 1, DType::Float32, 5);
  EXPECT_TRUE(all_equal(nn::AvgPool1d(nn::AvgPool1dOptions{.kernel_size = {2}}).forward(x1), avg_pool1d(x1, {2})));
  nn::AvgPool3d pool(nn::AvgPool3dOptions{.kernel_size = {2, 3, 2}, .stride = {1}, .padding = {1, 1, 0},
                                          .count_include_pad = false});
  EXPECT_TRUE(all_equal(pool.forward(x3), avg_pool3d(x3, {2, 3, 2}, {1}, {1, 1, 0}, false, false)));
  const Tensor x2 = random_uniform({1, 2, 4, 4}, -1, 1, DType::Float32, 6);
  EXPECT_TRUE(all_equal(nn::AvgPool2d(nn::AvgPool2dOptions{.kernel_size = {2}, .divisor_override = 3}).forward(x2),
                        avg_pool2d(x2, {2}, {}, {0}, false, true, 3)));
  EXPECT_KILN_ERROR(nn::AvgPool1d(nn::AvgPool1dOptions{.kernel_size = {2}, .divisor_override = 3}), "AvgPool1d",
                    "divisor_override");
}

TEST(NnPooling, AdaptiveAvgPoolLayersMatchFunctional) {
  const Tensor x3 = random_uniform({2, 3, 5, 6, 7}, -1, 1, DType::Float32, 7);
  nn::AdaptiveAvgPool3d global(nn::AdaptiveAvgPool3dOptions{.output_size = {1}});
  EXPECT_EQ(global.forward(x3).sizes(), (std::vector<int64_t>{2, 3, 1, 1, 1}));
  EXPECT_TRUE(testing::all_close(global.forward(x3), mean(x3, {2, 3, 4}, true)));
  const Tensor x2 = random_uniform({2, 3, 5, 7}, -1, 1, DType::Float32, 8);
  EXPECT_TRUE(all_equal(nn::AdaptiveAvgPool2d(nn::AdaptiveAvgPool2dOptions{.output_size = {2, 3}}).forward(x2),
                        adaptive_avg_pool2d(x2, {2, 3})));
  const Tensor x1 = random_uniform({2, 3, 10}, -1, 1, DType::Float32, 9);
  EXPECT_TRUE(all_equal(nn::AdaptiveAvgPool1d(nn::AdaptiveAvgPool1dOptions{.output_size = {4}}).forward(x1),
                        adaptive_avg_pool1d(x1, {4})));
}

}  // namespace
}  // namespace kiln
