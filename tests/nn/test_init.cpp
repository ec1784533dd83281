// nn::init: gains, fans of linear and conv weights, and the statistics of large
// initialised tensors against PyTorch's formulas (mean and std within a tolerance that
// the sample size makes generous: ~1e6 draws give a relative std error near 0.1%);
// uniform bounds exactly respected; determinism with a Generator.
#include <gtest/gtest.h>

#include <cmath>

#include "core/ops.h"
#include "nn/init.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

using nn::init::FanMode;

struct Stats {
  double mean, std, min, max;
};

Stats stats_of(const Tensor& t) {
  const Tensor d = t.to(DType::Float64);
  return {mean(d).item<double>(), d.std().item<double>(), amin(d).item<double>(), amax(d).item<double>()};
}

TEST(NnInit, Gains) {
  EXPECT_EQ(nn::init::calculate_gain("linear"), 1.0);
  EXPECT_EQ(nn::init::calculate_gain("conv3d"), 1.0);
  EXPECT_EQ(nn::init::calculate_gain("sigmoid"), 1.0);
  EXPECT_DOUBLE_EQ(nn::init::calculate_gain("tanh"), 5.0 / 3.0);
  EXPECT_DOUBLE_EQ(nn::init::calculate_gain("relu"), std::sqrt(2.0));
  EXPECT_DOUBLE_EQ(nn::init::calculate_gain("leaky_relu"), std::sqrt(2.0 / (1.0 + 0.01 * 0.01)));
  EXPECT_DOUBLE_EQ(nn::init::calculate_gain("leaky_relu", 0.2), std::sqrt(2.0 / 1.04));
  EXPECT_DOUBLE_EQ(nn::init::calculate_gain("selu"), 0.75);
  EXPECT_KILN_ERROR(nn::init::calculate_gain("swish"), "calculate_gain", "swish");
}

TEST(NnInit, FansOfLinearAndConvWeights) {
  EXPECT_EQ(nn::init::calculate_fan_in_and_fan_out(empty({5, 3})), (std::pair<int64_t, int64_t>{3, 5}));
  // Conv3d weight [out 8, in 4, 3, 3, 3]: receptive field 27.
  EXPECT_EQ(nn::init::calculate_fan_in_and_fan_out(empty({8, 4, 3, 3, 3})), (std::pair<int64_t, int64_t>{108, 216}));
  EXPECT_EQ(nn::init::calculate_fan_in_and_fan_out(empty({6, 2, 5})), (std::pair<int64_t, int64_t>{10, 30}));
  EXPECT_KILN_ERROR(nn::init::calculate_fan_in_and_fan_out(empty({7})), "at least 2 dims", "[7]");
}

TEST(NnInit, KaimingUniformStatisticsAndBounds) {
  Tensor w = empty({512, 256, 3, 3});  // fan_in 2304, ~1.2e6 elements
  nn::init::kaiming_uniform_(w, 0.0, FanMode::FanIn, "relu");
  const double bound = std::sqrt(3.0) * std::sqrt(2.0) / std::sqrt(2304.0);
  const Stats s = stats_of(w);
  EXPECT_GE(s.min, -bound);
  EXPECT_LE(s.max, bound);
  EXPECT_GT(s.max, 0.999 * bound);
  EXPECT_NEAR(s.mean, 0.0, 0.01 * bound);
  EXPECT_NEAR(s.std, bound / std::sqrt(3.0), 0.01 * bound / std::sqrt(3.0));
}

TEST(NnInit, KaimingNormalFanOut) {
  Tensor w = empty({64, 128, 3, 3, 3}, {.dtype = DType::Float64});  // fan_out 64 * 27 = 1728
  nn::init::kaiming_normal_(w, 0.0, FanMode::FanOut, "relu");
  const double std = std::sqrt(2.0) / std::sqrt(1728.0);
  const Stats s = stats_of(w);
  EXPECT_NEAR(s.mean, 0.0, 0.01 * std);
  EXPECT_NEAR(s.std, std, 0.01 * std);
}

TEST(NnInit, XavierUniformAndNormal) {
  Tensor w = empty({1000, 800});
  nn::init::xavier_uniform_(w, 2.0);
  const double std = 2.0 * std::sqrt(2.0 / 1800.0);
  Stats s = stats_of(w);
  EXPECT_GE(s.min, -std::sqrt(3.0) * std);
  EXPECT_LE(s.max, std::sqrt(3.0) * std);
  EXPECT_NEAR(s.std, std, 0.01 * std);
  nn::init::xavier_normal_(w);
  s = stats_of(w);
  EXPECT_NEAR(s.std, std / 2.0, 0.01 * std / 2.0);
  EXPECT_NEAR(s.mean, 0.0, 0.01 * std);
}

TEST(NnInit, UniformNormalAndConstants) {
  Tensor t = empty({1000000});
  nn::init::uniform_(t, -0.5, 2.0);
  Stats s = stats_of(t);
  EXPECT_GE(s.min, -0.5);
  EXPECT_LE(s.max, 2.0);
  EXPECT_NEAR(s.mean, 0.75, 0.01);
  EXPECT_NEAR(s.std, 2.5 / std::sqrt(12.0), 0.005);
  nn::init::normal_(t, 3.0, 0.5);
  s = stats_of(t);
  EXPECT_NEAR(s.mean, 3.0, 0.005);
  EXPECT_NEAR(s.std, 0.5, 0.005);
  nn::init::constant_(t, 1.25);
  EXPECT_EQ(stats_of(t).min, 1.25);
  EXPECT_EQ(stats_of(t).max, 1.25);
  nn::init::zeros_(t);
  EXPECT_EQ(stats_of(t).max, 0.0);
  nn::init::ones_(t);
  EXPECT_EQ(stats_of(t).min, 1.0);
}

TEST(NnInit, WorksOnParametersAndIsDeterministicWithAGenerator) {
  Tensor a = empty({10, 10}).requires_grad_(true);
  Tensor b = empty({10, 10}).requires_grad_(true);
  Generator gen_a(9), gen_b(9);
  nn::init::kaiming_uniform_(a, std::sqrt(5.0), FanMode::FanIn, "leaky_relu", &gen_a);
  nn::init::kaiming_uniform_(b, std::sqrt(5.0), FanMode::FanIn, "leaky_relu", &gen_b);
  EXPECT_TRUE(testing::all_equal(a, b));
  EXPECT_TRUE(a.requires_grad());
  EXPECT_TRUE(a.is_leaf());
  Tensor ints = zeros({3}, {.dtype = DType::Int64});
  EXPECT_KILN_ERROR(nn::init::normal_(ints), "normal_", "floating-point");
  EXPECT_KILN_ERROR(nn::init::uniform_(a, 1.0, 0.0), "uniform_", "a <= b");
}

}  // namespace
}  // namespace kiln
