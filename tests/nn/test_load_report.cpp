// Loading weights from elsewhere (nn/load_report.h): key mapping (prefixes stripped, keys
// dropped by pattern, renamed), the report's counts and lists, and the guides' case end to
// end: MedicalNet's ResNet-50 (here at 1/16 width: tests/data/pth/make_fixtures.py) built
// with its stem and segmentation head, its checkpoint (legacy format, saved from a GPU, keys
// under `module.`) loaded without Python, conv_seg replaced by pool + flatten + Linear.
#include <gtest/gtest.h>

#include <string>

#include "core/ops.h"
#include "data/pth.h"
#include "nn/nn.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

using nn::models::ResNet3d;
using nn::models::ResNet3dFamily;
using nn::models::ResNet3dHead;

nn::StateDict medicalnet_checkpoint() {
  return data::pth::state_dict(
      data::pth::load(std::string(KILN_SOURCE_DIR) + "/tests/data/pth/medicalnet_style.pth"));
}

Tensor find(const nn::StateDict& state, const std::string& name) {
  for (const auto& [n, t] : state) {
    if (n == name) return t;
  }
  ADD_FAILURE() << name;
  return Tensor();
}

TEST(LoadReport, MapKeysStripsDropsAndRenames) {
  const Tensor t = zeros({1});
  const nn::StateDict state = {{"module.a.w", t}, {"module.head.0.w", t}, {"b.w", t}, {"module.old.w", t}};
  std::vector<std::string> dropped;
  size_t stripped = 0;
  const nn::StateDict mapped =
      nn::map_keys(state, {.drop = {"head.*"}, .rename = {{"old.", "new."}}}, &dropped, &stripped);
  ASSERT_EQ(mapped.size(), 3u);
  EXPECT_EQ(mapped[0].first, "a.w");
  EXPECT_EQ(mapped[1].first, "b.w");
  EXPECT_EQ(mapped[2].first, "new.w");
  EXPECT_EQ(dropped, std::vector<std::string>{"module.head.0.w"});
  EXPECT_EQ(stripped, 3u);
  EXPECT_KILN_ERROR(nn::map_keys({{"module.a", t}, {"a", t}}, {}), "'module.a' and 'a' both map to 'a'");
  EXPECT_EQ(nn::map_keys({{"conv_seg", t}}, {.drop = {"conv_seg.*"}}).size(), 1u);  // a prefix, not a key
}

// The guide: build resnet50 with the MedicalNet stem, load the MedicalNet checkpoint
// (module.* keys), replace the head by pool + flatten + Linear, print the report.
TEST(LoadReport, MedicalNetCheckpointIntoAClassifier) {
  const nn::StateDict checkpoint = medicalnet_checkpoint();
  ResNet3d model({.depth = 50,
                  .family = ResNet3dFamily::MedicalNet,
                  .widen_factor = 1.0 / 16,
                  .head = ResNet3dHead::Segmentation});
  model.replace_head(nn::models::pool_flatten_linear(model.feature_channels(), 2));
  const nn::LoadReport report = nn::load_state_dict_mapped(model, checkpoint, {.drop = {"conv_seg.*"}});
  const size_t conv_seg_keys = 14;  // 0.weight, 0.bias, BNs 1 and 4 (5 entries each), 3.weight, 6.weight
  EXPECT_EQ(report.given, checkpoint.size());
  EXPECT_EQ(report.stripped, checkpoint.size());
  EXPECT_EQ(report.dropped.size(), conv_seg_keys);
  EXPECT_EQ(report.loaded, checkpoint.size() - conv_seg_keys);
  EXPECT_EQ(report.result.missing_keys, (std::vector<std::string>{"conv_seg.2.weight", "conv_seg.2.bias"}));
  EXPECT_TRUE(report.result.unexpected_keys.empty());
  EXPECT_TRUE(report.result.mismatched_keys.empty());
  const nn::StateDict state = model.state_dict();
  EXPECT_TRUE(testing::all_equal(find(state, "conv1.weight"), find(checkpoint, "module.conv1.weight")));
  EXPECT_TRUE(testing::all_equal(find(state, "layer4.2.bn3.running_var"),
                                 find(checkpoint, "module.layer4.2.bn3.running_var")));
  const std::string text = report.to_string();
  EXPECT_EQ(text.rfind("loaded " + std::to_string(report.loaded) + " of " +
                           std::to_string(checkpoint.size()) + " tensors into ResNet3d (" +
                           std::to_string(checkpoint.size()) + " keys had a prefix stripped)\n",
                       0),
            0u)
      << text;
  EXPECT_NE(
      text.find("  missing from the file (left as they were) (2): conv_seg.2.weight, conv_seg.2.bias\n"),
      std::string::npos)
      << text;
  EXPECT_NE(text.find("dropped by the mapping (14): module.conv_seg.0.weight, module.conv_seg.0.bias"),
            std::string::npos);
  model.eval();
  EXPECT_EQ(model.forward(testing::random_uniform({1, 1, 16, 16, 16}, -1, 1, DType::Float32, 1)).sizes(),
            (std::vector<int64_t>{1, 2}));
}

// Kept whole, MedicalNet's segmentation model loads everything but conv_seg.0.bias (Note
// [conv_seg's bias]), which the report lists; a shape mismatch is reported, not loaded.
TEST(LoadReport, TheSegmentationHeadItselfAndAShapeMismatch) {
  const nn::StateDict checkpoint = medicalnet_checkpoint();
  ResNet3d model({.depth = 50,
                  .family = ResNet3dFamily::MedicalNet,
                  .widen_factor = 1.0 / 16,
                  .head = ResNet3dHead::Segmentation});
  const nn::LoadReport report = nn::load_state_dict_mapped(model, checkpoint);
  EXPECT_EQ(report.result.unexpected_keys, std::vector<std::string>{"conv_seg.0.bias"});
  EXPECT_TRUE(report.result.missing_keys.empty());
  EXPECT_EQ(report.loaded, checkpoint.size() - 1);
  ResNet3d wider({.depth = 50,
                  .family = ResNet3dFamily::MedicalNet,
                  .widen_factor = 1.0 / 8,
                  .head = ResNet3dHead::Segmentation});
  const nn::LoadReport mismatch =
      nn::load_state_dict_mapped(wider, checkpoint, {.drop = {"conv_seg.0.bias"}});
  EXPECT_FALSE(mismatch.result.mismatched_keys.empty());
  EXPECT_NE(mismatch.to_string().find("shape mismatch (not loaded)"), std::string::npos);
  EXPECT_NE(mismatch.to_string().find("conv1.weight [4, 1, 7, 7, 7] (model [8, 1, 7, 7, 7])"),
            std::string::npos)
      << mismatch.to_string();
}

}  // namespace
}  // namespace kiln
