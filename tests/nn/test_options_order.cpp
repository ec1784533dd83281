// The nn options structs list their members in the order of the matching torch.nn class's
// arguments, Kiln's own after them (tests/core/test_options_structs.cpp says why): each is
// spelled out here in PyTorch's order, which compiles only while the declaration agrees.
#include <gtest/gtest.h>

#include "nn/nn.h"

namespace kiln::nn {
namespace {

TEST(NnOptionsOrder, DesignatedInitializersFollowPyTorchsArguments) {
  // Conv3d(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias)
  const ConvOptions conv{.in_channels = 1,
                         .out_channels = 2,
                         .kernel_size = {3},
                         .stride = {1},
                         .padding = {1},
                         .dilation = {1},
                         .groups = 1,
                         .bias = false};
  // ConvTranspose3d(in_channels, out_channels, kernel_size, stride, padding, output_padding, groups, bias,
  //                 dilation)
  const ConvTransposeOptions conv_transpose{.in_channels = 2,
                                            .out_channels = 1,
                                            .kernel_size = {2},
                                            .stride = {2},
                                            .padding = {0},
                                            .output_padding = {1},
                                            .groups = 1,
                                            .bias = false,
                                            .dilation = {1}};
  // Linear(in_features, out_features, bias)
  const LinearOptions linear{.in_features = 4, .out_features = 2, .bias = false};
  // BatchNorm3d(num_features, eps, momentum, affine, track_running_stats)
  const BatchNormOptions bn{.num_features = 8,
                            .eps = 1e-3,
                            .momentum = std::nullopt,
                            .affine = false,
                            .track_running_stats = false};
  // MaxPool3d(kernel_size, stride, padding, dilation, return_indices, ceil_mode)
  const MaxPoolOptions max_pool{
      .kernel_size = {2}, .stride = {2}, .padding = {0}, .dilation = {1}, .ceil_mode = true};
  // AvgPool3d(kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)
  const AvgPoolOptions avg_pool{.kernel_size = {2},
                                .stride = {2},
                                .padding = {0},
                                .ceil_mode = true,
                                .count_include_pad = false,
                                .divisor_override = 3};
  const AdaptiveAvgPoolOptions adaptive{.output_size = {1}};
  // LeakyReLU(negative_slope), PReLU(num_parameters, init), GELU(approximate), ELU(alpha)
  const LeakyReLUOptions leaky{.negative_slope = 0.2};
  const PReLUOptions prelu{.num_parameters = 3, .init = 0.1};
  const GELUOptions gelu{.approximate = "tanh"};
  const ELUOptions elu{.alpha = 0.5};
  // Dropout(p), then Kiln's generator; Flatten(start_dim, end_dim)
  const DropoutOptions dropout{.p = 0.2, .generator = nullptr};
  const FlattenOptions flatten{.start_dim = 0, .end_dim = 2};
  // SmoothL1Loss(size_average, reduce, reduction, beta); MSELoss / L1Loss(reduction)
  const SmoothL1LossOptions smooth_l1{.reduction = Reduction::Sum, .beta = 0.5};
  const RegressionLossOptions regression{.reduction = Reduction::Sum};

  EXPECT_FALSE(conv.bias);
  EXPECT_EQ(conv_transpose.output_padding, std::vector<int64_t>{1});
  EXPECT_FALSE(linear.bias);
  EXPECT_FALSE(bn.track_running_stats);
  EXPECT_TRUE(max_pool.ceil_mode);
  EXPECT_EQ(avg_pool.divisor_override, 3);
  EXPECT_EQ(adaptive.output_size, std::vector<int64_t>{1});
  EXPECT_EQ(leaky.negative_slope + prelu.init + elu.alpha, 0.2 + 0.1 + 0.5);
  EXPECT_EQ(gelu.approximate, "tanh");
  EXPECT_EQ(dropout.p, 0.2);
  EXPECT_EQ(flatten.end_dim, 2);
  EXPECT_EQ(smooth_l1.beta, 0.5);
  EXPECT_EQ(regression.reduction, Reduction::Sum);
}

}  // namespace
}  // namespace kiln::nn
