// layer_norm, group_norm and instance_norm (core/ops/normalization.h): outputs, input /
// weight / bias gradients and running statistics equal PyTorch's (tests/core/
// normalization/make_fixtures.py, torch 2.15); float64 gradient checks; eval with running
// statistics; bad arguments.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "core/ops.h"
#include "data/npz.h"
#include "tests/gradcheck.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

using testing::grad_leaf;
using testing::gradcheck;
const testing::Tolerance kTol{1e-12, 1e-12};

const data::npz::File& fixture() {
  static const data::npz::File file(std::string(KILN_SOURCE_DIR) +
                                    "/tests/core/normalization/normalization.npz");
  return file;
}

using Norm = std::function<Tensor(const Tensor& x, const Tensor& w, const Tensor& b)>;

void check_against_pytorch(const std::string& name, const Norm& norm) {
  SCOPED_TRACE(name);
  const data::npz::File& f = fixture();
  const Tensor x = f.load(name + "_input").requires_grad_(true);
  const Tensor w = f.load(name + "_weight").requires_grad_(true);
  const Tensor b = f.load(name + "_bias").requires_grad_(true);
  const Tensor y = norm(x, w, b);
  EXPECT_TRUE(testing::all_close(y, f.load(name + "_output"), kTol));
  mul(y, f.load(name + "_weights_out")).sum().backward();
  EXPECT_TRUE(testing::all_close(x.grad(), f.load(name + "_grad_input"), kTol));
  EXPECT_TRUE(testing::all_close(w.grad(), f.load(name + "_grad_weight"), kTol));
  EXPECT_TRUE(testing::all_close(b.grad(), f.load(name + "_grad_bias"), kTol));
}

TEST(Normalization, OutputsGradientsAndRunningStatisticsMatchPyTorch) {
  check_against_pytorch("layer", [](const Tensor& x, const Tensor& w, const Tensor& b) {
    return layer_norm(x, {4, 5}, w, b);
  });
  check_against_pytorch(
      "group", [](const Tensor& x, const Tensor& w, const Tensor& b) { return group_norm(x, 3, w, b); });
  check_against_pytorch("instance", [](const Tensor& x, const Tensor& w, const Tensor& b) {
    return instance_norm(x, {}, {}, w, b);
  });
  const Tensor running_mean = fixture().load("instance_running_running_mean");
  const Tensor running_var = fixture().load("instance_running_running_var");
  check_against_pytorch("instance_running", [&](const Tensor& x, const Tensor& w, const Tensor& b) {
    return instance_norm(x, running_mean, running_var, w, b, /*use_input_stats=*/true, /*momentum=*/0.2);
  });
  EXPECT_TRUE(testing::all_close(running_mean, fixture().load("instance_running_running_mean_after"), kTol));
  EXPECT_TRUE(testing::all_close(running_var, fixture().load("instance_running_running_var_after"), kTol));
}

TEST(Normalization, InstanceNormInEvalUsesTheRunningStatistics) {
  const Tensor x = testing::random_for({2, 3, 4, 4}, DType::Float64, 3);
  const Tensor mean = tensor<double>({0.5, -1.0, 2.0}), var = tensor<double>({1.5, 0.25, 4.0});
  const Tensor y = instance_norm(x, mean, var, {}, {}, /*use_input_stats=*/false);
  const Tensor expected =
      div(sub(x, mean.reshape({1, 3, 1, 1})), add(var.reshape({1, 3, 1, 1}), 1e-5).sqrt());
  EXPECT_TRUE(testing::all_close(y, expected, kTol));
  EXPECT_TRUE(testing::all_equal(mean, tensor<double>({0.5, -1.0, 2.0})));  // eval updates nothing
}

TEST(Normalization, BadArgumentsAreErrors) {
  const Tensor x = zeros({2, 6, 3, 3});
  EXPECT_KILN_ERROR(group_norm(x, 4), "group_norm", "6 channels do not split into 4 groups");
  EXPECT_KILN_ERROR(group_norm(x, 3, ones({5})), "group_norm", "weight must be [6]");
  EXPECT_KILN_ERROR(layer_norm(x, {4}), "layer_norm", "trailing dims");
  EXPECT_KILN_ERROR(layer_norm(x, {3, 3}, ones({3})), "layer_norm", "weight and bias must be");
  EXPECT_KILN_ERROR(layer_norm(x, {3}, {}, {}, -1.0), "eps");
  EXPECT_KILN_ERROR(instance_norm(zeros({2, 6})), "instance_norm", "[N, C, spatial...]");
  EXPECT_KILN_ERROR(instance_norm(x, ones({6}), {}), "both running statistics or none");
  EXPECT_KILN_ERROR(instance_norm(x, {}, {}, {}, {}, /*use_input_stats=*/false),
                    "needs the running statistics");
}

using Inputs = std::vector<Tensor>;

KILN_GRADCHECK_TEST(layer_norm) {
  EXPECT_TRUE(gradcheck(
      [](const Inputs& v) {
        return layer_norm(v[0], {3, 2}, v[1], v[2]);
      },
      {grad_leaf({2, 3, 2}, 1), grad_leaf({3, 2}, 2), grad_leaf({3, 2}, 3)}));
}

KILN_GRADCHECK_TEST(group_norm) {
  EXPECT_TRUE(gradcheck([](const Inputs& v) { return group_norm(v[0], 2, v[1], v[2]); },
                        {grad_leaf({2, 4, 3, 2}, 4), grad_leaf({4}, 5), grad_leaf({4}, 6)}));
  EXPECT_TRUE(gradcheck([](const Inputs& v) { return group_norm(v[0], 4); },
                        {testing::strided_grad_leaf({2, 4, 3}, 7)}));
}

KILN_GRADCHECK_TEST(instance_norm) {
  EXPECT_TRUE(gradcheck([](const Inputs& v) { return instance_norm(v[0], {}, {}, v[1], v[2]); },
                        {grad_leaf({2, 3, 2, 3}, 8), grad_leaf({3}, 9), grad_leaf({3}, 10)}));
}

}  // namespace
}  // namespace kiln
