// SyncBatchNorm (dist/sync_batch_norm.h) with ranks as threads: ranks holding uneven
// shares of a batch (one of them empty) give the outputs, input gradients, summed weight
// and bias gradients, and running statistics of one process with BatchNorm on the whole
// batch, in float64; statistics stay exact for data far from zero; eval needs no
// communication; convert_sync_batchnorm converts a model in place keeping names and state.
#include <gtest/gtest.h>

#include <mutex>

#include "core/ops.h"
#include "dist/sync_batch_norm.h"
#include "nn/nn.h"
#include "tests/dist/ranks_in_threads.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

using dist::ProcessGroupRing;
using testing::handle;
using testing::run_ranks_in_threads;
using namespace std::chrono_literals;

constexpr auto kLimit = std::chrono::seconds(120);


// A float64 BatchNorm3d of 3 channels with non-trivial weight and bias.
std::shared_ptr<nn::BatchNorm3d> make_bn(bool relu = false) {
  auto bn = std::make_shared<nn::BatchNorm3d>(nn::BatchNorm3dOptions{.num_features = 3, .relu = relu});
  bn->to(DType::Float64);
  NoGradGuard no_grad;
  bn->weight.copy_(tensor<double>({0.5, -1.5, 2.0}));
  bn->bias.copy_(tensor<double>({0.1, 0.2, -0.3}));
  return bn;
}

struct Result {
  Tensor out, grad_input, grad_residual, grad_weight, grad_bias, running_mean, running_var;
};

// Two training steps on `x` (the second one's result is returned), upstream gradient g;
// with a residual the layer's fused tail, relu(bn(x) + residual).
Result run(nn::BatchNormNd& bn, const Tensor& x_in, const Tensor& g, const Tensor& residual_in = Tensor()) {
  Result r;
  for (int step = 0; step < 2; ++step) {
    bn.zero_grad();
    Tensor x = x_in.detach().requires_grad_(true);
    const Tensor residual = residual_in.defined() ? residual_in.detach().requires_grad_(true) : Tensor();
    r.out = residual.defined() ? bn.forward_add_relu(x, residual) : bn.forward(x);
    r.out.mul(g).sum().backward();
    r.grad_input = x.grad();
    if (residual.defined()) r.grad_residual = residual.grad();
  }
  r.grad_weight = bn.weight.grad();
  r.grad_bias = bn.bias.grad();
  r.running_mean = bn.running_mean.clone();
  r.running_var = bn.running_var.clone();
  return r;
}

// tail: the layer's fused ReLU (relu) or the fused residual add and ReLU (add).
void expect_same_as_one_process(const std::vector<int64_t>& shares, double offset, bool relu,
                                bool add = false) {
  int64_t batch = 0;
  std::vector<int64_t> starts;
  for (const int64_t n : shares) starts.push_back(batch), batch += n;
  const Tensor x = testing::random_uniform({batch, 3, 3, 4, 5}, -2, 2, DType::Float64, 1)
                       .add(scalar_tensor(offset, {.dtype = DType::Float64}));
  const Tensor g = testing::random_uniform({batch, 3, 3, 4, 5}, -1, 1, DType::Float64, 2);
  const Tensor residual =
      add ? testing::random_uniform({batch, 3, 3, 4, 5}, -1, 1, DType::Float64, 3) : Tensor();
  const auto share = [&](const Tensor& t, size_t r) {
    return t.defined() ? t.narrow(0, starts[r], shares[r]) : t;
  };
  auto alone = make_bn(relu);
  const Result expected = run(*alone, x, g, residual);
  const auto world = static_cast<int>(shares.size());
  std::vector<Result> results(shares.size());
  const auto errors = run_ranks_in_threads(world, [&](ProcessGroupRing& group) {
    const auto r = static_cast<size_t>(group.rank());
    auto bn = make_bn(relu);
    EXPECT_EQ(dist::convert_sync_batchnorm(*bn, handle(group)), 1);
    results[r] = run(*bn, share(x, r), share(g, r), share(residual, r));
  });
  for (const std::string& e : errors) ASSERT_EQ(e, "");
  Tensor weight_sum = zeros({3}, {.dtype = DType::Float64}), bias_sum = zeros({3}, {.dtype = DType::Float64});
  // Far from zero every value carries an error of offset * 2^-52, on one process too; a
  // merge through sums of squares would be off by 1e-2 there.
  const testing::Tolerance tight =
      offset == 0 ? testing::Tolerance{1e-10, 1e-9} : testing::Tolerance{1e-7, 1e-7};
  for (size_t r = 0; r < shares.size(); ++r) {
    SCOPED_TRACE(::testing::Message() << "rank " << r << " of " << world);
    const Result& got = results[r];
    EXPECT_TRUE(testing::all_close(got.out, expected.out.narrow(0, starts[r], shares[r]), tight));
    EXPECT_TRUE(
        testing::all_close(got.grad_input, expected.grad_input.narrow(0, starts[r], shares[r]), tight));
    if (add) {
      EXPECT_TRUE(testing::all_close(got.grad_residual, share(expected.grad_residual, r), tight));
    }
    EXPECT_TRUE(testing::all_close(got.running_mean, expected.running_mean, tight));
    EXPECT_TRUE(testing::all_close(got.running_var, expected.running_var, tight));
    EXPECT_TRUE(testing::bitwise_equal(got.running_mean, results[0].running_mean));  // identical replicas
    weight_sum = weight_sum.add(got.grad_weight);
    bias_sum = bias_sum.add(got.grad_bias);
  }
  // Each rank's parameter gradient is its own share: they add up to the whole batch's.
  EXPECT_TRUE(testing::all_close(weight_sum, expected.grad_weight, tight));
  EXPECT_TRUE(testing::all_close(bias_sum, expected.grad_bias, tight));
}

TEST(SyncBatchNorm, UnevenSharesEqualOneProcessOnTheWholeBatch) {
  testing::with_watchdog(kLimit, [] {
    expect_same_as_one_process({3, 1}, 0.0, /*relu=*/false);
    expect_same_as_one_process({2, 0, 3}, 0.0, /*relu=*/false);  // a rank with an empty share
    expect_same_as_one_process({1, 2}, 0.0, /*relu=*/true);      // the fused ReLU
    expect_same_as_one_process({2, 1}, 0.0, /*relu=*/false, /*add=*/true);  // the fused residual tail
  });
}

TEST(SyncBatchNorm, StatisticsStayExactFarFromZero) {
  testing::with_watchdog(kLimit, [] { expect_same_as_one_process({2, 2}, 1e7, false); });
}

TEST(SyncBatchNorm, EvalUsesRunningStatisticsWithoutCommunication) {
  testing::with_watchdog(kLimit, [] {
    const Tensor x = testing::random_uniform({2, 3, 2, 2, 2}, -1, 1, DType::Float64, 3);
    auto reference = make_bn();
    reference->eval();
    const Tensor expected = reference->forward(x);
    const auto errors = run_ranks_in_threads(
        2,
        [&](ProcessGroupRing& group) {
          if (group.rank() == 1) return;  // never calls a collective: eval must not either
          auto bn = make_bn();
          dist::convert_sync_batchnorm(*bn, handle(group));
          bn->eval();
          EXPECT_TRUE(testing::all_close(bn->forward(x), expected));
        },
        2s);
    for (const std::string& e : errors) EXPECT_EQ(e, "");
  });
}

TEST(SyncBatchNorm, ConvertKeepsNamesStateAndObjectsAndPrintsSyncBatchNorm) {
  auto model = std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Layer>>{
      std::make_shared<nn::Conv3d>(
          nn::Conv3dOptions{.in_channels = 1, .out_channels = 4, .kernel_size = {3}}),
      std::make_shared<nn::BatchNorm3d>(nn::BatchNorm3dOptions{.num_features = 4}),
      std::make_shared<nn::ReLU>(), std::make_shared<nn::Flatten>(),
      std::make_shared<nn::BatchNorm1d>(nn::BatchNorm1dOptions{.num_features = 32})});
  const nn::StateDict before = model->state_dict();
  const Tensor weight = model->child("1")->parameter("weight");
  EXPECT_EQ(dist::convert_sync_batchnorm(*model), 2);
  const nn::StateDict after = model->state_dict();
  ASSERT_EQ(after.size(), before.size());
  for (size_t i = 0; i < after.size(); ++i) {
    EXPECT_EQ(after[i].first, before[i].first);
    EXPECT_EQ(after[i].second.data_ptr(), before[i].second.data_ptr()) << after[i].first;
  }
  EXPECT_TRUE(model->child("1")->parameter("weight").is_same(weight));
  EXPECT_NE(model->to_string().find("(1): SyncBatchNorm(4, eps=1e-05"), std::string::npos)
      << model->to_string();
  // Without an initialised default group a converted model trains as plain batch norm.
  const Tensor x = testing::random_uniform({2, 1, 4, 4, 4}, -1, 1, DType::Float32, 4);
  EXPECT_EQ(model->forward(x).sizes(), (std::vector<int64_t>{2, 32}));
  // SyncBatchNorm itself takes any rank >= 2.
  dist::SyncBatchNorm direct({.num_features = 2});
  EXPECT_EQ(
      direct.forward(ones({4, 2, 3}).add(testing::random_uniform({4, 2, 3}, 0, 1, DType::Float32, 5))).dim(),
      3);
  EXPECT_KILN_ERROR(direct.forward(ones({4})), "SyncBatchNorm: expected a 2-d or higher input");
}

}  // namespace
}  // namespace kiln
