// DenseNet3d (nn/models/densenet3d.h) against PyTorch (tests/nn/models/make_fixtures.py,
// torch 2.15): state-dict names of every depth in MONAI's and torchvision's layouts and
// the DenseNet-121 parameter count; DenseNet-121 outputs and gradients for formula weights
// in float64 and float32. The memory-efficient mode against the plain one: bit-identical
// gradients and running statistics (dropout included), and a lower peak of the CPU
// allocator. Also forward shapes of every depth with both stems, the layer options
// (depthwise-separable conv2, Swish, PReLU, fused bn-relu), the two layouts computing the
// same function, float64 gradient checks of a tiny network, and option errors.
#include <gtest/gtest.h>

#include <string>

#include "core/allocator.h"
#include "core/json.h"
#include "core/ops.h"
#include "nn/nn.h"
#include "tests/gradcheck.h"
#include "tests/nn/models/model_fixture.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

using nn::models::DenseNet3d;
using nn::models::DenseNet3dActivation;
using nn::models::DenseNet3dNaming;
using nn::models::DenseNet3dOptions;
using nn::models::DenseNet3dStem;

std::vector<std::string> state_names(const nn::Module& model) {
  std::vector<std::string> names;
  for (const auto& [name, tensor] : model.state_dict()) names.push_back(name);
  return names;
}

// Names for every depth and layout, built narrow (names do not depend on the widths);
// the parameter count of DenseNet-121 at full width, which make_fixtures.py printed from
// the PyTorch modules: 11,244,674 (3D kernels: 7^3 stem, 3^3 dense convs).
TEST(DenseNet3d, StateDictNamesOfEveryDepthAndLayoutMatchTheReference) {
  const json::Value reference =
      json::parse_file(std::string(KILN_SOURCE_DIR) + "/tests/nn/models/densenet3d_names.json");
  ASSERT_EQ(reference.as_object().size(), 8u);
  for (const auto& [key, entry] : reference.as_object()) {
    SCOPED_TRACE(key);
    const DenseNet3dNaming naming =
        key.starts_with("MONAI") ? DenseNet3dNaming::MONAI : DenseNet3dNaming::Torchvision;
    const DenseNet3d model({.depth = std::stoll(key.substr(key.find('-') + 1)),
                            .init_features = 8,
                            .growth_rate = 4,
                            .naming = naming});
    std::vector<std::string> expected;
    for (const json::Value& name : entry.find("state_dict")->as_array()) expected.push_back(name.as_string());
    EXPECT_EQ(state_names(model), expected);
  }
  EXPECT_EQ(nn::parameter_count(DenseNet3d({.depth = 121})), 11'244'674);
  EXPECT_EQ(reference.find("MONAI-121")->find("parameters")->as_integer(), 11'244'674);
}

TEST(DenseNet3d, DenseNet121MatchesPyTorch) {
  DenseNet3d model({.depth = 121});
  testing::expect_matches_fixture(model, "densenet121_3d.safetensors", DType::Float64, 1e-9);
  DenseNet3d model32({.depth = 121});
  testing::expect_matches_fixture(model32, "densenet121_3d.safetensors", DType::Float32, 1e-4);
}

// Note [Memory-efficient DenseNet]: the recompute repeats the same arithmetic, so the
// gradients are bit for bit the plain mode's, the running statistics too (updated once).
TEST(DenseNet3d, MemoryEfficientModeGivesBitIdenticalGradientsAndState) {
  for (const DType dtype : {DType::Float64, DType::Float32}) {
    for (const double drop_rate : {0.0, 0.2}) {
      SCOPED_TRACE(::testing::Message() << dtype << " drop_rate " << drop_rate);
      const DenseNet3dOptions options{
          .depth = 121, .init_features = 16, .growth_rate = 8, .drop_rate = drop_rate};
      DenseNet3d plain(options);
      DenseNet3dOptions efficient_options = options;
      efficient_options.memory_efficient = true;
      DenseNet3d efficient(efficient_options);
      plain.to(dtype);
      efficient.to(dtype);
      const Tensor x = testing::random_uniform({2, 1, 32, 32, 32}, -1, 1, dtype, 4);
      const Tensor w = testing::random_uniform({2, 2}, -1, 1, dtype, 5);
      testing::expect_same_step(testing::train_step(plain, x, w), testing::train_step(efficient, x, w));
    }
  }
}

// The figure itself is bench/'s (kiln_train_step --model densenet121); here, that the mode
// lowers the CPU allocator's peak at all, on a narrow network.
TEST(DenseNet3d, MemoryEfficientModeLowersThePeak) {
  size_t peaks[2] = {0, 0};
  for (const bool efficient : {false, true}) {
    DenseNet3d model({.depth = 121, .init_features = 16, .growth_rate = 8, .memory_efficient = efficient});
    const Tensor x = testing::random_uniform({2, 1, 32, 32, 32}, -1, 1, DType::Float32, 6);
    reset_peak_cpu_memory_stats();
    const size_t before = cpu_memory_stats().allocated_bytes;
    model.forward(x).sum().backward();
    peaks[efficient] = cpu_memory_stats().peak_allocated_bytes - before;
  }
  EXPECT_LT(peaks[1], peaks[0]) << "plain " << peaks[0] << " B, memory-efficient " << peaks[1] << " B";
}

TEST(DenseNet3d, ForwardShapesOfEveryDepthAndStem) {
  NoGradGuard no_grad;
  for (const int64_t depth : {121, 169, 201, 264}) {
    for (const DenseNet3dStem stem : {DenseNet3dStem::SmallInput, DenseNet3dStem::Standard}) {
      const int64_t side = stem == DenseNet3dStem::SmallInput ? 28 : 64;
      SCOPED_TRACE(::testing::Message() << depth << " at " << side);
      DenseNet3d model({.depth = depth,
                        .in_channels = 2,
                        .num_classes = 3,
                        .init_features = 8,
                        .growth_rate = 4,
                        .stem = stem});
      model.eval();
      const Tensor x = testing::random_uniform({1, 2, side, side, side}, -1, 1, DType::Float32, 7);
      // 28 -> 14 -> 7 -> 3 after three transitions; 64 -> 16 (stem and pool) -> 8 -> 4 -> 2.
      const int64_t last = stem == DenseNet3dStem::SmallInput ? 3 : 2;
      EXPECT_EQ(model.features(x).sizes(),
                (std::vector<int64_t>{1, model.feature_channels(), last, last, last}));
      EXPECT_EQ(model.forward(x).sizes(), (std::vector<int64_t>{1, 3}));
    }
  }
}

TEST(DenseNet3d, LayerOptions) {
  const Tensor x = testing::random_uniform({2, 1, 32, 32, 32}, -1, 1, DType::Float32, 8);
  DenseNet3d separable({.depth = 121, .init_features = 8, .growth_rate = 4, .depthwise_separable = true});
  const nn::StateDict state = separable.state_dict();
  EXPECT_EQ(state[6].first, "features.denseblock1.denselayer1.layers.norm1.weight");
  bool found = false;
  for (const auto& [name, t] : state) {
    if (name == "features.denseblock1.denselayer1.layers.conv2.depthwise.weight") {
      found = true;
      EXPECT_EQ(t.sizes(), (std::vector<int64_t>{16, 1, 3, 3, 3}));  // groups = bn_size x growth_rate
    }
  }
  EXPECT_TRUE(found);
  EXPECT_EQ(separable.forward(x).sizes(), (std::vector<int64_t>{2, 2}));
  for (const DenseNet3dActivation act : {DenseNet3dActivation::Swish, DenseNet3dActivation::PReLU}) {
    DenseNet3d model({.depth = 121, .init_features = 8, .growth_rate = 4, .activation = act});
    EXPECT_EQ(model.forward(x).sizes(), (std::vector<int64_t>{2, 2}));
    const bool prelu = act == DenseNet3dActivation::PReLU;
    EXPECT_EQ(model.state_dict()[6].first == "features.relu0.weight", prelu);
  }
  DenseNet3d plain({.depth = 121, .init_features = 8, .growth_rate = 4});
  DenseNet3d fused({.depth = 121, .init_features = 8, .growth_rate = 4, .fused_bn_relu = true});
  testing::fill_formula_weights(plain);
  testing::fill_formula_weights(fused);
  EXPECT_TRUE(testing::all_close(fused.forward(x), plain.forward(x), {1e-4, 1e-4}));
}

// torchvision's layout is the same function under other names: MONAI's weights, renamed
// ("...denselayer1.layers.norm1" -> "...denselayer1.norm1", class_layers.out -> classifier),
// load into it and give the same outputs.
TEST(DenseNet3d, TheTwoLayoutsComputeTheSameFunction) {
  DenseNet3d monai({.depth = 121, .init_features = 8, .growth_rate = 4});
  DenseNet3d torchvision(
      {.depth = 121, .init_features = 8, .growth_rate = 4, .naming = DenseNet3dNaming::Torchvision});
  testing::fill_formula_weights(monai);
  nn::StateDict renamed;
  for (auto [name, t] : monai.state_dict()) {
    if (const size_t at = name.find(".layers."); at != std::string::npos) name.erase(at, 7);
    if (name.starts_with("class_layers.out.")) name = "classifier." + name.substr(17);
    renamed.emplace_back(name, t);
  }
  ASSERT_TRUE(torchvision.load_state_dict(renamed).ok());
  monai.eval();
  torchvision.eval();
  const Tensor x = testing::random_uniform({2, 1, 32, 32, 32}, -1, 1, DType::Float32, 9);
  EXPECT_TRUE(testing::all_close(torchvision.forward(x), monai.forward(x), {1e-5, 1e-5}));
}

// (The memory-efficient mode's gradients are the plain mode's bit for bit: tested above.)
TEST(DenseNet3d, GradientsOfATinyNetworkAreCorrect) {
  auto model = std::make_shared<DenseNet3d>(DenseNet3dOptions{
      .depth = 121, .init_features = 2, .growth_rate = 1, .bn_size = 2, .stem = DenseNet3dStem::SmallInput});
  model->to(DType::Float64);
  const auto fn = [&](const std::vector<Tensor>& v) { return model->forward(v[0]); };
  EXPECT_TRUE(
      testing::gradcheck(fn, {testing::grad_leaf({2, 1, 8, 8, 8}, 10)}, {.atol = 1e-6, .rtol = 1e-4}));
}

TEST(DenseNet3d, BadOptionsAndInputsAreErrors) {
  EXPECT_KILN_ERROR(DenseNet3d({.depth = 122}), "DenseNet3d", "121, 169, 201 or 264", "122");
  EXPECT_KILN_ERROR(DenseNet3d({.growth_rate = 0}), "growth_rate");
  EXPECT_KILN_ERROR(DenseNet3d({.compression = 0}), "compression");
  EXPECT_KILN_ERROR(DenseNet3d({.drop_rate = 1}), "drop_rate");
  EXPECT_KILN_ERROR(DenseNet3d({.activation = DenseNet3dActivation::Swish, .fused_bn_relu = true}),
                    "fused_bn_relu", "ReLU");
  DenseNet3d model({.depth = 121, .init_features = 8, .growth_rate = 4});
  EXPECT_KILN_ERROR(model.forward(zeros({1, 2, 8, 8, 8})), "DenseNet3d", "[N, 1, D, H, W]");
}

}  // namespace
}  // namespace kiln
