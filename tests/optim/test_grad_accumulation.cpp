// Gradient accumulation: K micro-batches of B samples, each loss divided by K and
// backpropagated into the same .grad, give the gradients of one batch of K*B samples
// (mean-reduced loss), and so the same SGD and Adam steps. A small MLP (Linear, Tanh,
// Linear; no batch norm, whose statistics would differ per micro-batch), in float64.
#include <gtest/gtest.h>

#include <memory>

#include "nn/nn.h"
#include "tests/optim/optim_test_util.h"

namespace kiln {
namespace {

using testing::all_close;

std::shared_ptr<nn::Sequential> make_mlp(uint64_t seed) {
  manual_seed(seed);
  auto mlp = std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Layer>>{
      std::make_shared<nn::Linear>(nn::LinearOptions{.in_features = 6, .out_features = 8}),
      std::make_shared<nn::Tanh>(),
      std::make_shared<nn::Linear>(nn::LinearOptions{.in_features = 8, .out_features = 3})});
  mlp->to(DType::Float64);
  return mlp;
}

constexpr int64_t kMicroBatches = 4;  // K
constexpr int64_t kMicroBatch = 5;    // B

// One batch of K*B samples.
void full_batch_backward(nn::Sequential& mlp, const Tensor& x, const Tensor& y) {
  mse_loss(mlp.forward(x), y).backward();
}

// K micro-batches of B, loss / K each.
void accumulated_backward(nn::Sequential& mlp, const Tensor& x, const Tensor& y) {
  for (int64_t k = 0; k < kMicroBatches; ++k) {
    const Tensor xs = x.narrow(0, k * kMicroBatch, kMicroBatch);
    const Tensor ys = y.narrow(0, k * kMicroBatch, kMicroBatch);
    (mse_loss(mlp.forward(xs), ys) / static_cast<double>(kMicroBatches)).backward();
  }
}

template <typename MakeOptimizer>
void expect_same_training(const MakeOptimizer& make_optimizer) {
  auto whole = make_mlp(21);
  auto pieces = make_mlp(21);
  auto whole_optimizer = make_optimizer(whole->parameters());
  auto pieces_optimizer = make_optimizer(pieces->parameters());
  for (int step = 0; step < 3; ++step) {
    const Tensor x = testing::random_uniform({kMicroBatches * kMicroBatch, 6}, -1, 1, DType::Float64, 100 + step);
    const Tensor y = testing::random_uniform({kMicroBatches * kMicroBatch, 3}, -1, 1, DType::Float64, 200 + step);
    whole_optimizer.zero_grad();
    pieces_optimizer.zero_grad();
    full_batch_backward(*whole, x, y);
    accumulated_backward(*pieces, x, y);
    const auto whole_params = whole->named_parameters();
    const auto pieces_params = pieces->named_parameters();
    ASSERT_EQ(whole_params.size(), pieces_params.size());
    for (size_t i = 0; i < whole_params.size(); ++i)
      EXPECT_TRUE(all_close(pieces_params[i].second.grad(), whole_params[i].second.grad()))
          << whole_params[i].first << " at step " << step;
    whole_optimizer.step();
    pieces_optimizer.step();
    for (size_t i = 0; i < whole_params.size(); ++i)
      EXPECT_TRUE(all_close(pieces_params[i].second.detach(), whole_params[i].second.detach()))
          << whole_params[i].first << " after step " << step;
  }
}

TEST(OptimGradAccumulation, MicroBatchesGiveTheFullBatchGradientsAndSteps) {
  expect_same_training([](std::vector<Tensor> params) {
    return optim::SGD(std::move(params), optim::SGDOptions{.lr = 0.1, .momentum = 0.9});
  });
  expect_same_training(
      [](std::vector<Tensor> params) { return optim::Adam(std::move(params), optim::AdamOptions{.lr = 0.01}); });
}

}  // namespace
}  // namespace kiln
