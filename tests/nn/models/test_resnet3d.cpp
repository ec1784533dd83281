// ResNet3d (nn/models/resnet3d.h) against PyTorch (tests/nn/models/make_fixtures.py,
// torch 2.15): the state-dict names and parameter counts of every depth of both families,
// and ResNet-18 (MedMNIST) and ResNet-50 (MedicalNet) outputs and gradients for formula
// weights in float64 and float32. Also: forward shapes of every depth and stem at 28^3
// and 64^3 (narrow: the shapes do not depend on the width), feature_size and MedicalNet's
// 56x448x448 output stride, the head swap, the initialisations, fused bn-relu, float64
// gradient checks of tiny networks, and option errors.
#include <gtest/gtest.h>

#include <sstream>
#include <string>

#include "core/json.h"
#include "core/ops.h"
#include "nn/nn.h"
#include "tests/gradcheck.h"
#include "tests/nn/models/model_fixture.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

using nn::models::ResNet3d;
using nn::models::ResNet3dFamily;
using nn::models::ResNet3dHead;
using nn::models::ResNet3dOptions;
using nn::models::ShortcutType;

const int64_t kDepths[] = {10, 18, 34, 50, 101, 152, 200};

json::Value reference_names() {
  return json::parse_file(std::string(KILN_SOURCE_DIR) + "/tests/nn/models/resnet3d_names.json");
}

// The reference's configuration key -> Kiln's options (MedicalNet: segmentation head).
ResNet3dOptions options_for(const std::string& key) {
  ResNet3dOptions o;
  std::stringstream parts(key);
  std::string family, depth, shortcut, head;
  std::getline(parts, family, '-');
  std::getline(parts, depth, '-');
  std::getline(parts, shortcut, '-');
  std::getline(parts, head, '-');
  o.family = family == "MedicalNet" ? ResNet3dFamily::MedicalNet : ResNet3dFamily::MedMNIST;
  o.depth = std::stoll(depth);
  o.shortcut_type = shortcut == "A" ? ShortcutType::A : ShortcutType::B;
  o.head = family == "MedicalNet" && head.empty() ? ResNet3dHead::Segmentation : ResNet3dHead::Classification;
  return o;
}

using nn::parameter_count;

// Names for every configuration of the fixture; the names do not depend on the width, so
// the deep ones are built narrow (a full ResNet-200 is 2 x 70 M random draws), and the
// counts are checked at full width up to depth 50.
TEST(ResNet3d, StateDictNamesAndParameterCountsMatchTheReferenceForEveryDepth) {
  const json::Value reference = reference_names();
  ASSERT_EQ(reference.as_object().size(), 2u * 7 + 4 + 1);  // both families, A and B at 18 and 50, one more
  for (const auto& [key, entry] : reference.as_object()) {
    SCOPED_TRACE(key);
    ResNet3dOptions options = options_for(key);
    const bool full_width = options.depth <= 50;
    if (!full_width) options.widen_factor = 1.0 / 16;
    const ResNet3d model(options);
    std::vector<std::string> names;
    for (const auto& [name, tensor] : model.state_dict()) names.push_back(name);
    std::vector<std::string> expected;
    for (const json::Value& name : entry.find("state_dict")->as_array()) expected.push_back(name.as_string());
    EXPECT_EQ(names, expected);
    if (full_width) {
      EXPECT_EQ(parameter_count(model), entry.find("parameters")->as_integer());
    }
  }
}

// The counts from the architecture, for one input channel and 2 classes (make_fixtures.py
// prints the same numbers from the PyTorch modules):
//   MedMNIST ResNet-18: stem 27 x 64 + BN 2 x 64 = 1,856. A BasicBlock c_in -> c_out has
//     27 c_in c_out + 27 c_out^2 + 4 c_out, plus c_in c_out + 2 c_out for a projection
//     shortcut. layer1..4 = 442,880 + 1,557,760 + 6,228,480 + 24,908,800, and the linear
//     head 512 x 2 + 2: 33,140,802 in all.
//   The others by the same rules (Bottleneck c_in -> p: c_in p + 27 p^2 + 4 p^2 + 2p + 2p
//   + 8p, and MedicalNet's 7^3 stem and conv_seg head).
TEST(ResNet3d, ParameterCountsOfTheCommonDepths) {
  EXPECT_EQ(parameter_count(ResNet3d({.depth = 18})), 33'140'802);
  EXPECT_EQ(parameter_count(ResNet3d({.depth = 34})), 63'450'434);
  EXPECT_EQ(parameter_count(ResNet3d({.depth = 50})), 46'138'946);
  EXPECT_EQ(parameter_count(ResNet3d(
                {.depth = 18, .family = ResNet3dFamily::MedicalNet, .head = ResNet3dHead::Segmentation})),
            33'318'912);
  EXPECT_EQ(parameter_count(ResNet3d(
                {.depth = 50, .family = ResNet3dFamily::MedicalNet, .head = ResNet3dHead::Segmentation})),
            46'707'200);
}

TEST(ResNet3d, ResNet18MedMnistMatchesPyTorch) {
  ResNet3d model({.depth = 18});
  testing::expect_matches_fixture(model, "resnet18_3d.safetensors", DType::Float64, 1e-9);
  ResNet3d model32({.depth = 18});
  testing::expect_matches_fixture(model32, "resnet18_3d.safetensors", DType::Float32, 1e-4);
}

TEST(ResNet3d, ResNet50MedicalNetMatchesPyTorch) {
  ResNet3d model({.depth = 50, .family = ResNet3dFamily::MedicalNet, .dilated_layers = true});
  testing::expect_matches_fixture(model, "resnet50_3d.safetensors", DType::Float64, 1e-9);
  ResNet3d model32({.depth = 50, .family = ResNet3dFamily::MedicalNet, .dilated_layers = true});
  testing::expect_matches_fixture(model32, "resnet50_3d.safetensors", DType::Float32, 1e-4);
}

// Every depth and family at 28^3 and 64^3, 1/16 of the width (the shapes are the same):
// the classification output, and features() of the size feature_size() predicts.
TEST(ResNet3d, ForwardShapesOfEveryDepthAndStem) {
  NoGradGuard no_grad;
  for (const ResNet3dFamily family : {ResNet3dFamily::MedMNIST, ResNet3dFamily::MedicalNet}) {
    for (const int64_t depth : kDepths) {
      ResNet3d model(
          {.depth = depth, .in_channels = 2, .num_classes = 3, .family = family, .widen_factor = 1.0 / 16});
      model.eval();
      for (const int64_t side : {28, 64}) {
        SCOPED_TRACE(::testing::Message()
                     << "depth " << depth << " side " << side
                     << (family == ResNet3dFamily::MedicalNet ? " MedicalNet" : " MedMNIST"));
        const Tensor x = testing::random_uniform({1, 2, side, side, side}, -1, 1, DType::Float32, 3);
        const Tensor features = model.features(x);
        std::vector<int64_t> expected = {1, model.feature_channels()};
        for (int64_t s : model.feature_size({side, side, side})) expected.push_back(s);
        EXPECT_EQ(features.sizes(), expected);
        EXPECT_EQ(model.forward(x).sizes(), (std::vector<int64_t>{1, 3}));
      }
    }
  }
}

// MedicalNet's segmentation backbone has output stride 8: its 56x448x448 input gives
// 7x56x56 features and (conv_seg upsamples 2x) a 14x112x112 map. feature_size says so
// by the formula, which a forward pass at 8x64x64 confirms.
TEST(ResNet3d, MedicalNetSegmentationOutputStride) {
  ResNet3d model({.depth = 10,
                  .num_classes = 3,
                  .family = ResNet3dFamily::MedicalNet,
                  .widen_factor = 1.0 / 16,
                  .head = ResNet3dHead::Segmentation});
  EXPECT_EQ(model.feature_size({56, 448, 448}), (std::vector<int64_t>{7, 56, 56}));
  NoGradGuard no_grad;
  const Tensor x = testing::random_uniform({1, 1, 8, 64, 64}, -1, 1, DType::Float32, 4);
  EXPECT_EQ(model.features(x).sizes(), (std::vector<int64_t>{1, 32, 1, 8, 8}));
  EXPECT_EQ(model.forward(x).sizes(), (std::vector<int64_t>{1, 3, 2, 16, 16}));
  // A depth stride of 1 in the stem (conv and max-pool) keeps four times the slices.
  ResNet3d thin({.depth = 10,
                 .family = ResNet3dFamily::MedicalNet,
                 .widen_factor = 1.0 / 16,
                 .head = ResNet3dHead::Segmentation,
                 .stem_depth_stride = 1});
  EXPECT_EQ(thin.feature_size({56, 448, 448}), (std::vector<int64_t>{28, 56, 56}));
  EXPECT_EQ(thin.features(x).sizes(), (std::vector<int64_t>{1, 32, 4, 8, 8}));
}

// The guide's recipe: MedicalNet's ResNet-50 with conv_seg replaced by pool + flatten +
// Linear(2048, 2), under conv_seg's name.
TEST(ResNet3d, ReplacingTheSegmentationHeadByAClassifier) {
  ResNet3d model({.depth = 50,
                  .family = ResNet3dFamily::MedicalNet,
                  .widen_factor = 1.0 / 8,
                  .head = ResNet3dHead::Segmentation});
  model.replace_head(nn::models::pool_flatten_linear(model.feature_channels(), 2));
  const nn::StateDict state = model.state_dict();
  EXPECT_EQ(state.back().first, "conv_seg.2.bias");
  EXPECT_EQ(model.forward(testing::random_uniform({2, 1, 16, 16, 16}, -1, 1, DType::Float32, 5)).sizes(),
            (std::vector<int64_t>{2, 2}));
  EXPECT_KILN_ERROR(model.replace_head(nullptr), "null");
}

TEST(ResNet3d, Initialisations) {
  manual_seed(7);
  ResNet3d model({.depth = 18, .zero_init_residual = true});
  const nn::StateDict state = model.state_dict();
  const auto find = [&](const std::string& name) {
    for (const auto& [n, t] : state) {
      if (n == name) return t;
    }
    ADD_FAILURE() << name;
    return Tensor();
  };
  // Kaiming normal, fan_out, ReLU: std sqrt(2 / (512 x 27)).
  const Tensor w = find("layer4.1.conv2.weight");
  EXPECT_NEAR(std(w).item<double>(), std::sqrt(2.0 / (512 * 27)), 0.01 * std::sqrt(2.0 / (512 * 27)));
  EXPECT_TRUE(testing::all_equal(find("layer2.0.bn2.weight"), zeros({128})));
  EXPECT_TRUE(testing::all_equal(find("layer2.0.bn1.weight"), ones({128})));
  EXPECT_TRUE(testing::all_equal(find("layer2.0.shortcut.1.weight"), ones({128})));
  // I3D inflation: each 3x3 kernel repeated along depth / 3.
  ResNet3d inflated({.depth = 10, .init = nn::models::ConvInit::I3dInflation});
  const Tensor k = inflated.state_dict()[0].second;  // conv1.weight [64, 1, 3, 3, 3]
  EXPECT_TRUE(testing::all_equal(k.select(2, 0), k.select(2, 2)));
  const double bound = 1.0 / std::sqrt(9.0) / 3.0;  // Conv2d's default bound 1/sqrt(fan_in 9), / depth
  EXPECT_LE(amax(abs(k)).item<double>(), bound);
  EXPECT_GT(amax(abs(k)).item<double>(), 0.8 * bound);
}

TEST(ResNet3d, InflatedTwoDimensionalWeightsLoad) {
  ResNet3d model({.depth = 10});
  nn::StateDict weights_2d;
  for (const auto& [name, t] : model.state_dict()) {
    weights_2d.emplace_back(name, t.dim() == 5
                                      ? testing::random_uniform({t.size(0), t.size(1), t.size(3), t.size(4)},
                                                                -1, 1, DType::Float32, 6)
                                      : t.clone());
  }
  ASSERT_TRUE(model.load_state_dict(nn::models::inflate_state_dict(weights_2d, model)).ok());
  const Tensor k = model.state_dict()[0].second;
  EXPECT_TRUE(testing::all_close(k.sum({2}), weights_2d[0].second));
  EXPECT_KILN_ERROR(nn::models::inflate_2d(zeros({2, 2, 3}), 3), "inflate_2d", "[O, I, h, w]");
}

TEST(ResNet3d, FusedBatchNormReluGivesTheSameNetwork) {
  ResNet3d plain({.depth = 18, .widen_factor = 0.125});
  ResNet3d fused({.depth = 18, .widen_factor = 0.125, .fused_bn_relu = true});
  testing::fill_formula_weights(plain);
  testing::fill_formula_weights(fused);
  const Tensor x = testing::random_uniform({2, 1, 12, 12, 12}, -1, 1, DType::Float32, 8);
  EXPECT_TRUE(testing::all_close(fused.forward(x), plain.forward(x), {1e-4, 1e-4}));
}

// Checkpointed stages recompute the same arithmetic: the gradients and running statistics
// are bit for bit the plain network's (with dropout, whose mask the recompute redraws).
TEST(ResNet3d, CheckpointedStagesGiveBitIdenticalGradientsAndState) {
  for (const DType dtype : {DType::Float64, DType::Float32}) {
    SCOPED_TRACE(::testing::Message() << dtype);
    const ResNet3dOptions options{.depth = 18, .widen_factor = 0.125, .dropout = 0.3};
    ResNet3dOptions checkpointed_options = options;
    checkpointed_options.checkpoint_stages = true;
    ResNet3d plain(options), checkpointed(checkpointed_options);
    plain.to(dtype);
    checkpointed.to(dtype);
    const Tensor x = testing::random_uniform({2, 1, 12, 12, 12}, -1, 1, dtype, 4);
    const Tensor w = testing::random_uniform({2, 2}, -1, 1, dtype, 5);
    testing::expect_same_step(testing::train_step(plain, x, w), testing::train_step(checkpointed, x, w));
  }
}

// Float64 gradient checks of tiny networks (2 channels wide) with respect to the input:
// both shortcut types, both families' blocks, training-mode batch norm.
TEST(ResNet3d, GradientsOfTinyNetworksAreCorrect) {
  for (const ShortcutType shortcut : {ShortcutType::A, ShortcutType::B}) {
    for (const int64_t depth : {10, 50}) {
      SCOPED_TRACE(::testing::Message() << "depth " << depth << (shortcut == ShortcutType::A ? " A" : " B"));
      auto model = std::make_shared<ResNet3d>(
          ResNet3dOptions{.depth = depth, .shortcut_type = shortcut, .widen_factor = 1.0 / 32});
      model->to(DType::Float64);
      const auto fn = [&](const std::vector<Tensor>& v) { return model->forward(v[0]); };
      EXPECT_TRUE(
          testing::gradcheck(fn, {testing::grad_leaf({2, 1, 4, 4, 4}, 9)}, {.atol = 1e-6, .rtol = 1e-4}));
    }
  }
}

TEST(ResNet3d, BadOptionsAndInputsAreErrors) {
  EXPECT_KILN_ERROR(ResNet3d({.depth = 11}), "ResNet3d", "depth must be 10, 18, 34, 50, 101, 152 or 200",
                    "11");
  EXPECT_KILN_ERROR(ResNet3d({.depth = 18, .head = ResNet3dHead::Segmentation}), "segmentation head",
                    "family = MedicalNet");
  EXPECT_KILN_ERROR(ResNet3d({.depth = 18, .dilated_layers = true}), "dilated");
  EXPECT_KILN_ERROR(ResNet3d({.depth = 18, .dropout = 1.0}), "dropout");
  EXPECT_KILN_ERROR(ResNet3d({.depth = 18, .in_channels = 0}), "in_channels");
  EXPECT_KILN_ERROR(ResNet3d({.depth = 18, .widen_factor = 0.001}), "widen_factor");
  ResNet3d model({.depth = 10, .in_channels = 2, .widen_factor = 1.0 / 16});
  EXPECT_KILN_ERROR(model.forward(zeros({1, 1, 8, 8, 8})), "ResNet3d", "[N, 2, D, H, W]", "[1, 1, 8, 8, 8]");
}

}  // namespace
}  // namespace kiln
