// ResUNet (nn/models/res_unet.h) equals nnU-Net's ResidualEncoderUNet
// (dynamic_network_architectures 0.4.4) with the same weights: the state-dict keys in
// order (aliases included), every output with deep supervision, the input and parameter
// gradients, in float64 to 1e-9, isotropic and anisotropic (tests/nn/models/res_unet/
// make_fixtures.py); the deep-supervision weights; bad options and inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include "core/ops.h"
#include "data/npz.h"
#include "nn/models/res_unet.h"
#include "tests/nn/models/formula_weights.h"
#include "tests/test_util.h"

namespace kiln::nn::models {
namespace {

const std::string kFolder = std::string(KILN_SOURCE_DIR) + "/tests/nn/models/res_unet/";

const data::npz::File& fixture() {
  static const data::npz::File file(kFolder + "res_unet.npz");
  return file;
}

using testing::formula_pattern;

struct Case {
  std::string name;
  ResUNetOptions options;
  std::vector<int64_t> input;
};
const std::vector<Case>& cases() {
  static const std::vector<Case> all = {
      {"isotropic",
       {.in_channels = 1,
        .features = {4, 8, 12, 16},
        .strides = {{1, 1, 1}, {2, 2, 2}, {2, 2, 2}, {2, 2, 2}},
        .blocks = {1, 2, 2, 2},
        .num_classes = 3,
        .decoder_convs = {1, 1, 1},
        .conv_bias = true,
        .deep_supervision = true},
       {1, 1, 16, 16, 24}},
      {"anisotropic",
       {.in_channels = 2,
        .features = {4, 8, 8},
        .kernel_sizes = {{1, 3, 3}, {3, 3, 3}, {3, 3, 3}},
        .strides = {{1, 1, 1}, {1, 2, 2}, {2, 2, 2}},
        .blocks = {1, 1, 2},
        .num_classes = 2,
        .decoder_convs = {1, 2},
        .conv_bias = false,
        .deep_supervision = false},
       {2, 2, 8, 16, 16}},
  };
  return all;
}

std::vector<std::string> keys_file(const std::string& name) {
  std::ifstream in(kFolder + name + "_keys.txt");
  std::vector<std::string> keys;
  for (std::string line; std::getline(in, line);) keys.push_back(line);
  return keys;
}

TEST(ResUNet, HasNnUNetsStateDictKeysInOrder) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    std::vector<std::string> kiln;
    for (const auto& [key, t] : ResUNet(c.options).state_dict()) kiln.push_back(key);
    const std::vector<std::string> nnunet = keys_file(c.name);
    ASSERT_GT(nnunet.size(), 100u);
    EXPECT_EQ(kiln, nnunet);
  }
}

TEST(ResUNet, OutputsAndGradientsEqualNnUNetsInFloat64) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    auto net = std::make_shared<ResUNet>(c.options);
    net->to(DType::Float64);
    {
      NoGradGuard no_grad;
      for (auto& [key, p] : net->named_parameters()) {
        p.copy_(testing::formula_weight(key, std::vector<int64_t>(p.sizes().begin(), p.sizes().end()),
                                        "norm.weight"));
      }
    }
    net->train();
    const Tensor x = mul(formula_pattern(c.input, 0.37, 0.11), 1.5).requires_grad_(true);
    const std::vector<Tensor> outputs = net->forward_deep(x);
    ASSERT_EQ(outputs.size(), c.options.deep_supervision ? c.options.features.size() - 1 : 1u);
    Tensor total = zeros({}, {.dtype = DType::Float64});
    for (size_t k = 0; k < outputs.size(); ++k) {
      SCOPED_TRACE(k);
      const Tensor expected = fixture().load(c.name + "/output/" + std::to_string(k));
      ASSERT_EQ(outputs[k].sizes(), expected.sizes());
      EXPECT_TRUE(testing::all_close(outputs[k], expected, {1e-9, 1e-9}));
      std::vector<int64_t> shape(outputs[k].sizes().begin(), outputs[k].sizes().end());
      total =
          add(total,
              mul(outputs[k], formula_pattern(shape, 0.23, static_cast<double>(k), /*cosine=*/true)).sum());
    }
    EXPECT_TRUE(testing::all_equal(net->forward(x.detach()), outputs[0].detach()));
    total.backward();
    EXPECT_TRUE(testing::all_close(x.grad(), fixture().load(c.name + "/grad/input"), {1e-9, 1e-9}));
    size_t compared = 0;
    for (const auto& [key, p] : net->named_parameters()) {
      SCOPED_TRACE(key);
      const std::string name = c.name + "/grad/" + key;
      if (!fixture().contains(name)) {  // a seg layer deep supervision would use
        EXPECT_TRUE(key.find("seg_layers") != std::string::npos);
        EXPECT_FALSE(p.grad().defined());
        continue;
      }
      EXPECT_TRUE(testing::all_close(p.grad(), fixture().load(name), {1e-9, 1e-9}));
      ++compared;
    }
    EXPECT_GT(compared, 30u);
  }
}

TEST(ResUNet, DeepSupervisionWeightsHalveWithDepthAndSumToOne) {
  // nnU-Net: 1, 1/2, 1/4, 0 normalised
  const std::vector<double> w = deep_supervision_weights(4);
  ASSERT_EQ(w.size(), 4u);
  EXPECT_DOUBLE_EQ(w[0], 1.0 / 1.75);
  EXPECT_DOUBLE_EQ(w[1], 0.5 / 1.75);
  EXPECT_DOUBLE_EQ(w[2], 0.25 / 1.75);
  EXPECT_EQ(w[3], 0.0);
  EXPECT_EQ(deep_supervision_weights(1), std::vector<double>{1.0});
  EXPECT_KILN_ERROR(deep_supervision_weights(0), "deep_supervision_weights");
}

TEST(ResUNet, BadOptionsAndInputsAreErrors) {
  EXPECT_KILN_ERROR(ResUNet({.features = {4}}), "ResUNet", "at least 2 stages");
  EXPECT_KILN_ERROR(ResUNet({.features = {4, 8}, .blocks = {1}}), "ResUNet", "one entry per stage");
  EXPECT_KILN_ERROR(ResUNet({.features = {4, 8}, .kernel_sizes = {{3, 3, 3}, {2, 3, 3}}, .blocks = {1, 1}}),
                    "ResUNet", "odd");
  EXPECT_KILN_ERROR(ResUNet({.features = {4, 8}, .blocks = {1, 1}, .decoder_convs = {1, 1}}), "ResUNet",
                    "decoder_convs needs 1");
  ResUNet net({.features = {4, 8, 8}, .blocks = {1, 1, 1}});
  EXPECT_KILN_ERROR(net.forward(zeros({1, 1, 16, 16, 18})), "ResUNet",
                    "not divisible by its strides' product 4");
  EXPECT_KILN_ERROR(net.forward(zeros({1, 2, 16, 16, 16})), "ResUNet", "[N, 1, D, H, W]");
}

// The deep-supervision loss: each output against the labels at its size (nearest-exact:
// floor((i + 0.5) x the factor) along each axis), weighted 4/7, 2/7, 1/7 and 0.
TEST(ResUNet, DeepSupervisionLossWeighsEachOutputAgainstItsLabels) {
  Generator generator(3);
  const Tensor labels = randint(0, 3, {2, 1, 8, 8, 8}, {}, &generator);
  std::vector<Tensor> outputs;
  for (int64_t side : {8, 4, 2, 1}) {
    outputs.push_back(
        testing::random_for({2, 3, side, side, side}, DType::Float64, static_cast<uint64_t>(side))
            .requires_grad_(true));
  }
  const auto ce = [](const Tensor& logits, const Tensor& y) { return cross_entropy(logits, squeeze(y, 1)); };
  const Tensor loss = deep_supervision_loss(outputs, labels, ce);
  // nearest-exact halving takes index 2i + 1 along each axis
  const Tensor half = index_select(
      index_select(index_select(labels, 2, tensor<int64_t>({1, 3, 5, 7})), 3, tensor<int64_t>({1, 3, 5, 7})),
      4, tensor<int64_t>({1, 3, 5, 7}));
  // and a quarter from the full labels (as nnU-Net, not from the half): floor((i + 0.5) 4)
  const Tensor four = tensor<int64_t>({2, 6});
  const Tensor quarter = index_select(index_select(index_select(labels, 2, four), 3, four), 4, four);
  const double expected = ce(outputs[0], labels).item<double>() * 4 / 7 +
                          ce(outputs[1], half).item<double>() * 2 / 7 +
                          ce(outputs[2], quarter).item<double>() * 1 / 7;
  EXPECT_NEAR(loss.item<double>(), expected, 1e-12);
  loss.backward();
  EXPECT_TRUE(outputs[2].grad().defined());
  EXPECT_FALSE(outputs[3].grad().defined());  // weight 0: not even computed
  EXPECT_KILN_ERROR(deep_supervision_loss(outputs, squeeze(labels, 1), ce), "deep_supervision_loss",
                    "[N, 1, d...]");
}

}  // namespace
}  // namespace kiln::nn::models
