// The bundled models trained in channels-last (Module::to(ChannelsLast3d), what `kiln
// train --channels-last` does) against the same models trained in NCDHW, on the CPU:
// ResNet-18, ResNet-50 and DenseNet-121 at half width (the architecture unchanged, half
// the CPU time) on a 16^3 batch, three SGD steps with momentum. The weights stay
// channels-last through the optimizer, a step makes no layout conversion (the batch
// comes channels-last, as the trainer makes it: Note [Channels-last training] in
// train/run_state.cpp), and the losses, gradients and weights match NCDHW's within what
// float32 allows these networks (Note [Float32 agreement of deep networks] below). The
// same holds with fused_bn_relu (the fused bn-relu pairs and, in the ResNets, the fused
// bn-add-relu block tails: Note [Batch norm, add and ReLU] in core/backend.h) in either
// layout. Each op's own agreement across layouts is checked tightly, op by op, in
// tests/core/test_channels_last_ops.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/flags.h"
#include "core/memory_format.h"
#include "core/ops.h"
#include "nn/models/by_name.h"
#include "optim/sgd.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

using namespace kiln::testing;

struct Trained {
  std::vector<double> losses;
  nn::NamedTensors first_grads;  // every parameter's gradient at the first step
  nn::StateDict weights;         // after the last step
  int64_t conversions_per_step = -1;  // the last step's
  bool conv_weights_channels_last = true;
};

Trained train(const std::string& name, bool channels_last, bool fused) {
  manual_seed(5);
  const bool densenet = name.starts_with("densenet");  // its small stem keeps a 16^3 input's last block 1^3
  const auto model = nn::models::model_by_name({.name = name,
                                                .in_channels = 1,
                                                .num_classes = 3,
                                                .stem = densenet ? "small" : "",
                                                .width = 0.5,
                                                .fused_bn_relu = fused});
  if (channels_last) model->to(MemoryFormat::ChannelsLast3d);
  optim::SGD sgd(model->parameters(), {.lr = 0.01, .momentum = 0.9});
  const Tensor batch = random_for({2, 1, 16, 16, 16}, DType::Float32, 8);
  const Tensor x = channels_last ? batch.contiguous(MemoryFormat::ChannelsLast3d) : batch;
  const Tensor y = tensor(std::vector<int64_t>{0, 2});
  Trained out;
  for (int step = 0; step < 3; ++step) {
    const int64_t before = layout_conversions();
    sgd.zero_grad();
    const Tensor loss = cross_entropy(model->forward(x), y);
    loss.backward();
    if (step == 0) {
      for (const auto& [key, p] : model->named_parameters())
        out.first_grads.emplace_back(key, p.grad().clone());
    }
    sgd.step();
    out.conversions_per_step = layout_conversions() - before;
    out.losses.push_back(loss.item<double>());
  }
  out.weights = model->state_dict();
  for (const auto& [key, t] : out.weights) {
    if (t.dim() == 5 && !t.is_contiguous(MemoryFormat::ChannelsLast3d))
      out.conv_weights_channels_last = false;
  }
  return out;
}

class ChannelsLastTraining : public ::testing::TestWithParam<std::string> {};

// Note [Float32 agreement of deep networks]: two correct float32 runs of these models that
// round differently (channels-last convolutions run oneDNN's NDHWC kernels, NCDHW ones its
// blocked kernels: Note [oneDNN and channels-last]) agree in the forward pass to about
// 1e-6, but their first gradients only to about a percent. The backward of a deep
// batch-norm network at initialisation is that sensitive, in either layout: scaling every
// convolution weight of the NCDHW run by a random factor within 1 +- 1e-6 moved the
// gradients, as a relative L2 norm over all of them, by up to 0.024 (ResNet-18 0.0024,
// ResNet-50 0.015-0.032, DenseNet-121 up to 0.008, seeds 8-10), and single tensors by up
// to 0.05; the channels-last runs differed from NCDHW by as much (up to 0.033 overall and
// 0.052 per tensor), and 1e-5 moves ResNet-18's by 0.007. So the forward loss is held to
// 1e-5 and the first gradients to a relative L2 error of 0.1 over the model and 0.25
// per tensor: a real layout fault (channels permuted, a gradient lost, a wrong stride) is
// an error of order one. The steps then part further, as any two float32 runs of these
// models would: the first step moves ResNet-50's loss from 1.74 to about 1.1 (its
// gradients at initialisation are large), so after three steps the losses are held to
// 10% and the weights are not compared; SGD's and Adam's channels-last updates are
// checked bit for bit against row-major ones in tests/optim/test_optimizer.cpp.
// Per tensor and over the model: the relative L2 norm of actual - expected.
void expect_close(const nn::NamedTensors& actual, const nn::NamedTensors& expected, const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size());
  double model_error = 0, model_scale = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    ASSERT_EQ(actual[i].first, expected[i].first);
    const Tensor e = expected[i].second.to(DType::Float64);
    const double error = (actual[i].second.to(DType::Float64) - e).pow(2).sum().item<double>();
    const double scale = e.pow(2).sum().item<double>();
    EXPECT_LE(std::sqrt(error / std::max(scale, 1e-300)), 0.25) << what << " " << expected[i].first;
    model_error += error;
    model_scale += scale;
  }
  EXPECT_LE(std::sqrt(model_error / model_scale), 0.1) << what << " over the model";
}

// `actual` against plain NCDHW training.
void expect_matches(const Trained& actual, const Trained& ncdhw, bool channels_last) {
  ASSERT_EQ(ncdhw.losses.size(), actual.losses.size());
  EXPECT_NEAR(actual.losses[0], ncdhw.losses[0], 1e-5 * (1 + std::abs(ncdhw.losses[0]))) << "the forward";
  for (size_t i = 1; i < ncdhw.losses.size(); ++i) {  // trajectories that part, by a few percent
    EXPECT_NEAR(actual.losses[i], ncdhw.losses[i], 0.1 * (1 + std::abs(ncdhw.losses[i]))) << "step " << i;
  }
  expect_close(actual.first_grads, ncdhw.first_grads, "first gradients");
  ASSERT_EQ(actual.weights.size(), ncdhw.weights.size());
  for (size_t i = 0; i < ncdhw.weights.size(); ++i) {  // the batch counters
    const Tensor& expected = ncdhw.weights[i].second;
    if (!is_floating(expected.dtype())) {
      EXPECT_TRUE(all_close(actual.weights[i].second, expected, {.atol = 0, .rtol = 0}))
          << ncdhw.weights[i].first;
    }
  }
  EXPECT_EQ(actual.conv_weights_channels_last, channels_last) << "the optimizer kept the weights' layout";
  EXPECT_EQ(actual.conversions_per_step, 0) << "a step, batch included";
}

TEST_P(ChannelsLastTraining, MatchesNcdhwTraining) {
  if (!onednn_enabled()) GTEST_SKIP() << "without oneDNN the reference convolutions convert by design";
  const Trained ncdhw = train(GetParam(), false, false);
  EXPECT_FALSE(ncdhw.conv_weights_channels_last);
  EXPECT_EQ(ncdhw.conversions_per_step, 0);
  for (const bool channels_last : {false, true}) {
    for (const bool fused : {false, true}) {
      if (!channels_last && !fused) continue;
      SCOPED_TRACE(::testing::Message()
                   << (channels_last ? "channels-last" : "NCDHW") << (fused ? ", fused_bn_relu" : ""));
      expect_matches(train(GetParam(), channels_last, fused), ncdhw, channels_last);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Models, ChannelsLastTraining,
                         ::testing::Values("resnet18", "resnet50", "densenet121"));

}  // namespace
}  // namespace kiln
