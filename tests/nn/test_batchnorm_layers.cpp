// BatchNorm1d/2d/3d layers: parameters and buffers as PyTorch's, training forward against
// kiln::batch_norm, the running statistics by hand (momentum and cumulative average),
// num_batches_tracked, eval with the running statistics, track_running_stats = false,
// affine = false, the rank checks per 1d/2d/3d, the fused ReLU and residual tail, and
// inside a checkpoint (the statistics updated once, gradients as without it).
#include <gtest/gtest.h>

#include <cmath>

#include "core/autograd/node.h"
#include "core/ops.h"
#include "nn/nn.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

using testing::all_close;
using testing::random_uniform;

// Per-channel mean and unbiased variance of [N, C, *] over N and the spatial dims.
std::pair<Tensor, Tensor> channel_stats(const Tensor& x) {
  const Tensor flat = x.transpose(0, 1).reshape({x.size(1), -1});
  return {mean(flat, {1}), var(flat, {1})};
}

TEST(NnBatchNorm, ParametersAndBuffersAsPyTorch) {
  nn::BatchNorm3d bn(nn::BatchNorm3dOptions{.num_features = 4});
  std::vector<std::string> names;
  for (const auto& [name, t] : bn.state_dict()) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"weight", "bias", "running_mean", "running_var", "num_batches_tracked"}));
  EXPECT_TRUE(testing::all_equal(bn.weight, ones({4})));
  EXPECT_TRUE(testing::all_equal(bn.bias, zeros({4})));
  EXPECT_TRUE(testing::all_equal(bn.running_var, ones({4})));
  EXPECT_EQ(bn.num_batches_tracked.dtype(), DType::Int64);
  EXPECT_EQ(bn.num_batches_tracked.dim(), 0);
  EXPECT_EQ(bn.to_string(), "BatchNorm3d(4, eps=1e-05, momentum=0.1, affine=True, track_running_stats=True)");
}

TEST(NnBatchNorm, TrainingUpdatesRunningStatsWithMomentum) {
  nn::BatchNorm3d bn(nn::BatchNorm3dOptions{.num_features = 3, .momentum = 0.2});
  const Tensor x = random_uniform({2, 3, 2, 3, 2}, -1, 3, DType::Float32, 1);
  Tensor rm = zeros({3}), rv = ones({3});
  const Tensor expected = batch_norm(x, rm, rv, bn.weight, bn.bias, true, 0.2, 1e-5);
  EXPECT_TRUE(all_close(bn.forward(x), expected));
  const auto [m, v] = channel_stats(x);
  EXPECT_TRUE(all_close(bn.running_mean, mul(m, 0.2)));
  EXPECT_TRUE(all_close(bn.running_var, add(mul(v, 0.2), 0.8)));
  EXPECT_EQ(bn.num_batches_tracked.item<int64_t>(), 1);
  bn.forward(x);
  EXPECT_EQ(bn.num_batches_tracked.item<int64_t>(), 2);
}

TEST(NnBatchNorm, ReluOptionFusesTheReluIntoTheLayer) {
  nn::BatchNorm3d fused(nn::BatchNorm3dOptions{.num_features = 3, .relu = true});
  nn::BatchNorm3d plain(nn::BatchNorm3dOptions{.num_features = 3});
  EXPECT_EQ(fused.to_string(), "BatchNorm3d(3, eps=1e-05, momentum=0.1, affine=True, track_running_stats=True, relu=True)");
  EXPECT_EQ(fused.state_dict().size(), plain.state_dict().size());  // the same parameters and buffers
  const Tensor x = random_uniform({2, 3, 2, 3, 2}, -1, 3, DType::Float32, 2);
  for (bool training : {true, false}) {
    fused.train(training);
    plain.train(training);
    const Tensor y = fused.forward(x);
    EXPECT_TRUE(testing::all_equal(y, relu(plain.forward(x)))) << "training " << training;
    EXPECT_EQ(y.grad_fn()->name(), "batch_norm_relu");
    EXPECT_TRUE(testing::all_equal(fused.running_mean, plain.running_mean));
  }
}

// forward_add_relu is relu(forward(x) + r) in one op, training and eval, with the same
// running statistics; a layer that has its own ReLU refuses it (that ReLU comes first).
TEST(NnBatchNorm, ForwardAddReluFusesTheResidualTail) {
  nn::BatchNorm3d fused(nn::BatchNorm3dOptions{.num_features = 3});
  nn::BatchNorm3d plain(nn::BatchNorm3dOptions{.num_features = 3});
  const Tensor x = random_uniform({2, 3, 2, 3, 2}, -1, 3, DType::Float32, 3);
  const Tensor r = random_uniform({2, 3, 2, 3, 2}, -1, 1, DType::Float32, 4);
  for (bool training : {true, false}) {
    fused.train(training);
    plain.train(training);
    const Tensor y = fused.forward_add_relu(x, r);
    EXPECT_TRUE(testing::all_equal(y, relu(add(plain.forward(x), r)))) << "training " << training;
    EXPECT_EQ(y.grad_fn()->name(), "batch_norm_add_relu");
    EXPECT_TRUE(testing::all_equal(fused.running_mean, plain.running_mean));
    EXPECT_TRUE(testing::all_equal(fused.running_var, plain.running_var));
    EXPECT_EQ(fused.num_batches_tracked.item<int64_t>(), plain.num_batches_tracked.item<int64_t>());
  }
  nn::BatchNorm3d with_relu(nn::BatchNorm3dOptions{.num_features = 3, .relu = true});
  EXPECT_KILN_ERROR(with_relu.forward_add_relu(x, r), "BatchNorm3d", "forward_add_relu", "relu = true");
  EXPECT_KILN_ERROR(fused.forward_add_relu(x, Tensor()), "BatchNorm3d", "undefined residual");
  EXPECT_KILN_ERROR(fused.forward_add_relu(ones({3, 2, 2, 2}), r), "BatchNorm3d", "5-d");
  EXPECT_KILN_ERROR(fused.forward_add_relu(x, r.narrow(0, 0, 1)), "shape");
}

TEST(NnBatchNorm, CumulativeMovingAverageWithoutMomentum) {
  nn::BatchNorm2d bn(nn::BatchNorm2dOptions{.num_features = 2, .momentum = std::nullopt});
  Tensor mean_sum = zeros({2}), var_sum = zeros({2});
  for (uint64_t step = 0; step < 3; ++step) {
    const Tensor x = random_uniform({4, 2, 3, 3}, -2, 2 + static_cast<double>(step), DType::Float32, 10 + step);
    bn.forward(x);
    const auto [m, v] = channel_stats(x);
    mean_sum = add(mean_sum, m);
    var_sum = add(var_sum, v);
  }
  EXPECT_EQ(bn.num_batches_tracked.item<int64_t>(), 3);
  EXPECT_TRUE(all_close(bn.running_mean, div(mean_sum, 3.0)));
  EXPECT_TRUE(all_close(bn.running_var, div(var_sum, 3.0)));
}

TEST(NnBatchNorm, EvalUsesRunningStatsAndLeavesThem) {
  nn::BatchNorm1d bn(nn::BatchNorm1dOptions{.num_features = 3});
  {
    NoGradGuard no_grad;
    bn.running_mean.copy_(tensor<float>({0.5, -1.0, 2.0}));
    bn.running_var.copy_(tensor<float>({4.0, 0.25, 1.0}));
    bn.weight.copy_(tensor<float>({2.0, 1.0, -1.0}));
    bn.bias.copy_(tensor<float>({0.0, 1.0, 0.5}));
  }
  bn.eval();
  const Tensor x = random_uniform({5, 3}, -1, 1, DType::Float32, 2);
  const Tensor expected = add(mul(div(sub(x, bn.running_mean), sqrt(add(bn.running_var, 1e-5))), bn.weight), bn.bias);
  EXPECT_TRUE(all_close(bn.forward(x), expected));
  EXPECT_EQ(bn.num_batches_tracked.item<int64_t>(), 0);
  EXPECT_TRUE(all_close(bn.running_mean, tensor<float>({0.5, -1.0, 2.0})));
}

TEST(NnBatchNorm, WithoutTrackingOrAffine) {
  nn::BatchNorm1d bn(nn::BatchNorm1dOptions{.num_features = 2, .affine = false, .track_running_stats = false});
  EXPECT_TRUE(bn.state_dict().empty());
  bn.eval();  // no running statistics: eval normalises with the batch's
  const Tensor x = random_uniform({6, 2, 4}, -1, 1, DType::Float32, 3);
  const Tensor y = bn.forward(x);
  const auto [m, v] = channel_stats(y);
  EXPECT_TRUE(all_close(m, zeros({2}), {1e-5, 0}));
}

// Note [Checkpoint recompute]: the recompute in backward normalises by the same batch
// statistics but leaves the running ones alone, so a checkpointed layer ends a step in
// the state and with the gradients of a plain one; instance norm likewise.
TEST(NnBatchNorm, InsideACheckpointTheRunningStatisticsAreUpdatedOnce) {
  const Tensor x = random_uniform({4, 3, 5, 5, 5}, -2, 3, DType::Float64, 11);
  const Tensor w = random_uniform({4, 3, 5, 5, 5}, -1, 1, DType::Float64, 12);
  for (const bool instance : {false, true}) {
    SCOPED_TRACE(instance ? "InstanceNorm3d" : "BatchNorm3d");
    std::vector<std::shared_ptr<nn::Layer>> layers;
    std::vector<Tensor> input_grads;
    for (int copy = 0; copy < 2; ++copy) {
      std::shared_ptr<nn::Layer> layer;
      if (instance) {
        layer = std::make_shared<nn::InstanceNorm3d>(
            nn::InstanceNorm3dOptions{.num_features = 3, .affine = true, .track_running_stats = true});
      } else {
        layer = std::make_shared<nn::BatchNorm3d>(nn::BatchNorm3dOptions{.num_features = 3, .momentum = std::nullopt});
      }
      layer->to(DType::Float64);
      const Tensor input = x.detach().requires_grad_(true);
      Tensor y;
      if (copy == 0) {
        y = layer->forward(input);
      } else {
        y = checkpoint([&](const std::vector<Tensor>& in) { return std::vector<Tensor>{layer->forward(in[0])}; },
                       {input})[0];
      }
      mul(y, w).sum().backward();
      layers.push_back(layer);
      input_grads.push_back(input.grad());
    }
    EXPECT_TRUE(testing::all_equal(input_grads[1], input_grads[0]));
    const nn::StateDict plain = layers[0]->state_dict(), checkpointed = layers[1]->state_dict();
    ASSERT_EQ(plain.size(), checkpointed.size());
    for (size_t i = 0; i < plain.size(); ++i) {
      EXPECT_TRUE(testing::all_equal(checkpointed[i].second, plain[i].second)) << plain[i].first;
    }
    // Not vacuous: the step moved the running mean off its zeros.
    EXPECT_GT(abs(layers[0]->state_dict()[2].second).sum().item<double>(), 0.1);
    for (size_t i = 0; i < 2; ++i) {
      EXPECT_TRUE(testing::all_equal(layers[1]->named_parameters()[i].second.grad(),
                                     layers[0]->named_parameters()[i].second.grad()));
    }
  }
}

TEST(NnBatchNorm, RankChecks) {
  nn::BatchNorm1d bn1(nn::BatchNorm1dOptions{.num_features = 2});
  nn::BatchNorm2d bn2(nn::BatchNorm2dOptions{.num_features = 2});
  nn::BatchNorm3d bn3(nn::BatchNorm3dOptions{.num_features = 2});
  EXPECT_EQ(bn1.forward(ones({3, 2})).sizes(), (std::vector<int64_t>{3, 2}));
  EXPECT_KILN_ERROR(bn1.forward(ones({3, 2, 2, 2})), "BatchNorm1d", "2-d or 3-d", "[3, 2, 2, 2]");
  EXPECT_KILN_ERROR(bn2.forward(ones({3, 2, 2})), "BatchNorm2d", "4-d");
  EXPECT_KILN_ERROR(bn3.forward(ones({3, 2, 2, 2})), "BatchNorm3d", "5-d");
  EXPECT_KILN_ERROR(bn3.forward(ones({3, 4, 2, 2, 2})), "BatchNorm3d", "2 channels");
}

}  // namespace
}  // namespace kiln
