// The bundled models trained in channels-last (Module::to(ChannelsLast3d), what `kiln
// train --channels-last` does) against the same models trained in NCDHW, on the CPU:
// ResNet-18, ResNet-50 and DenseNet-121 at half width (the architecture unchanged, half
// the CPU time) on a 16^3 batch, three SGD steps with momentum. The losses and the final
// weights match within float32 tolerance, the weights stay channels-last through the
// optimizer, and a step makes no layout conversion (the batch comes channels-last, as
// the trainer makes it: Note [Channels-last training] in train/run_state.cpp). The same
// holds with fused_bn_relu (the fused bn-relu pairs and, in the ResNets, the fused
// bn-add-relu block tails: Note [Batch norm, add and ReLU] in core/backend.h) in either
// layout.
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
  nn::StateDict weights;
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

// `actual` against plain NCDHW training.
void expect_matches(const Trained& actual, const Trained& ncdhw, bool channels_last) {
  // The first step's gradients and, three steps on, the losses and weights: the same to
  // float32 rounding (the sums run in other orders), relative to the model's largest
  // gradient or weight (a batch norm's bias gradient may be a near-cancelling sum).
  const auto largest = [](const nn::NamedTensors& tensors) {
    double m = 0;
    for (const auto& [key, t] : tensors) m = std::max(m, t.to(DType::Float64).abs().max().item<double>());
    return m;
  };
  const auto expect_close = [](const nn::NamedTensors& actual, const nn::NamedTensors& expected,
                               double scale) {
    ASSERT_EQ(actual.size(), expected.size());
    for (size_t i = 0; i < expected.size(); ++i) {
      ASSERT_EQ(actual[i].first, expected[i].first);
      EXPECT_TRUE(all_close(actual[i].second, expected[i].second, {.atol = 1e-4 * scale, .rtol = 1e-3}))
          << expected[i].first;
    }
  };
  expect_close(actual.first_grads, ncdhw.first_grads, largest(ncdhw.first_grads));
  ASSERT_EQ(ncdhw.losses.size(), actual.losses.size());
  for (size_t i = 0; i < ncdhw.losses.size(); ++i) {
    EXPECT_NEAR(actual.losses[i], ncdhw.losses[i], 1e-4 * (1 + std::abs(ncdhw.losses[i]))) << "step " << i;
  }
  expect_close(actual.weights, ncdhw.weights, largest(ncdhw.weights));
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
