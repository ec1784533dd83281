// 3D transforms (data/transforms.h) against hand-computed results (numpy's rot90, crops,
// pads, normalisations), random ones for their statistics and determinism (Note
// [Per-sample randomness]: the same generator gives the same result, and image and label
// keys move together), and their errors.
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <vector>

#include "core/ops.h"
#include "data/transforms.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

using data::Sample;
using testing::all_close;
using testing::all_equal;

// [1, 1, 2, 3] holding 1 .. 6: the plane [[1, 2, 3], [4, 5, 6]].
Tensor plane() { return arange(1, 7, 1, {.dtype = DType::Float32}).view({1, 1, 2, 3}); }

Sample sample_of(const Tensor& image) { return {.tensors = {{"image", image}}, .metadata = {}}; }

Tensor applied(const data::Transform& t, const Tensor& image, uint64_t seed = 1) {
  Sample s = sample_of(image);
  Generator g(seed);
  t.apply(s, g);
  return s.at("image");
}

TEST(Transforms, SampleGeneratorsDependOnSeedEpochAndIndexOnly) {
  const auto draw = [](uint64_t seed, int64_t epoch, int64_t index) {
    Generator g = data::sample_generator(seed, epoch, index);
    return rand({4}, {}, &g).to_vector<float>();
  };
  EXPECT_EQ(draw(1, 2, 3), draw(1, 2, 3));
  EXPECT_NE(draw(1, 2, 3), draw(1, 2, 4));
  EXPECT_NE(draw(1, 2, 3), draw(1, 3, 3));
  EXPECT_NE(draw(1, 2, 3), draw(2, 2, 3));
}

TEST(Transforms, ToFloatAndNormalize) {
  const Tensor bytes = tensor<uint8_t>({0, 51, 255, 102}, {1, 1, 1, 4});
  EXPECT_TRUE(
      all_close(applied(data::ToFloat(1.0 / 255), bytes), tensor<float>({0, 0.2f, 1, 0.4f}, {1, 1, 1, 4})));
  const Tensor x = tensor<float>({1, 2, 3, 4}, {1, 1, 1, 4});
  const float s = std::sqrt(1.25f);  // population std of 1..4
  EXPECT_TRUE(all_close(applied(data::Normalize::zscore(), x),
                        tensor<float>({-1.5f / s, -0.5f / s, 0.5f / s, 1.5f / s}, {1, 1, 1, 4})));
  EXPECT_TRUE(all_close(applied(data::Normalize::zscore(2, 4), x),
                        tensor<float>({-0.25f, 0, 0.25f, 0.5f}, {1, 1, 1, 4})));
  EXPECT_TRUE(all_close(applied(data::Normalize::min_max(), x),
                        tensor<float>({0, 1 / 3.f, 2 / 3.f, 1}, {1, 1, 1, 4})));
  EXPECT_TRUE(
      all_close(applied(data::Normalize::window(2, 3), x), tensor<float>({0, 0, 1, 1}, {1, 1, 1, 4})));
  EXPECT_TRUE(all_equal(applied(data::Normalize::zscore(), full({1, 1, 1, 3}, 5.0)), zeros({1, 1, 1, 3})));
  EXPECT_TRUE(all_equal(applied(data::Normalize::min_max(), full({1, 1, 1, 3}, 5.0)), zeros({1, 1, 1, 3})));
  EXPECT_KILN_ERROR(applied(data::Normalize::min_max(), bytes), "Normalize", "uint8", "put ToFloat first");
  EXPECT_KILN_ERROR(data::Normalize::window(3, 2), "low < high");
}

TEST(Transforms, FlipsAndQuarterTurnsAsNumpy) {
  EXPECT_TRUE(all_equal(applied(data::RandomFlip({2}, 1.0), plane()),
                        tensor<float>({3, 2, 1, 6, 5, 4}, {1, 1, 2, 3})));
  EXPECT_TRUE(all_equal(applied(data::RandomFlip({1}, 1.0), plane()),
                        tensor<float>({4, 5, 6, 1, 2, 3}, {1, 1, 2, 3})));
  EXPECT_TRUE(all_equal(applied(data::RandomFlip({0, 1, 2}, 0.0), plane()), plane()));
  // np.rot90([[1, 2, 3], [4, 5, 6]], k) for k = 1, 2, 3
  EXPECT_TRUE(all_equal(applied(data::RandomRotate90({1, 2}, {1}), plane()),
                        tensor<float>({3, 6, 2, 5, 1, 4}, {1, 1, 3, 2})));
  EXPECT_TRUE(all_equal(applied(data::RandomRotate90({1, 2}, {2}), plane()),
                        tensor<float>({6, 5, 4, 3, 2, 1}, {1, 1, 2, 3})));
  EXPECT_TRUE(all_equal(applied(data::RandomRotate90({1, 2}, {3}), plane()),
                        tensor<float>({4, 1, 5, 2, 6, 3}, {1, 1, 3, 2})));
  EXPECT_TRUE(all_equal(applied(data::RandomRotate90({1, 2}, {0}), plane()), plane()));
  EXPECT_KILN_ERROR(data::RandomRotate90({1, 1}), "two different axes");
  EXPECT_KILN_ERROR(data::RandomFlip({3}), "spatial axes are 0, 1 and 2, got 3");
  EXPECT_KILN_ERROR(applied(data::RandomFlip(), zeros({2, 3})), "must be a [C, D, H, W] volume");
}

// An image and its mask (a copy) move together under every random spatial transform.
TEST(Transforms, ImageAndLabelKeysGetTheSameDraw) {
  const Tensor volume = rand({1, 4, 5, 6}, {}, nullptr);
  const data::Compose spatial(
      {std::make_shared<data::RandomFlip>(std::vector<int>{0, 1, 2}, 0.5, data::Keys{"image", "label"}),
       std::make_shared<data::RandomRotate90>(std::array<int, 2>{0, 2}, std::vector<int>{0, 1, 2, 3},
                                              data::Keys{"image", "label"}),
       std::make_shared<data::RandomCrop>(std::array<int64_t, 3>{3, 3, 3}, data::Keys{"image", "label"})});
  std::set<std::vector<float>> outcomes;
  for (uint64_t seed = 0; seed < 40; ++seed) {
    Sample s{.tensors = {{"image", volume}, {"label", volume.clone()}}, .metadata = {}};
    Generator g(seed);
    spatial.apply(s, g);
    EXPECT_TRUE(all_equal(s.at("image"), s.at("label"))) << seed;
    EXPECT_EQ(s.at("image").sizes(), (std::vector<int64_t>{1, 3, 3, 3}));
    outcomes.insert(s.at("image").contiguous().reshape({-1}).to_vector<float>());
    Sample again{.tensors = {{"image", volume}, {"label", volume.clone()}}, .metadata = {}};
    Generator same(seed);
    spatial.apply(again, same);
    EXPECT_TRUE(all_equal(again.at("image"), s.at("image"))) << "not reproducible, seed " << seed;
  }
  EXPECT_GT(outcomes.size(), 20u);  // the draws do vary
}

TEST(Transforms, CropsAndPads) {
  const Tensor x = arange(36, {.dtype = DType::Float32}).view({1, 3, 3, 4});
  // centre of 3 x 3 x 4 for 1 x 1 x 2: starts (1, 1, 1): element 1*12 + 1*4 + 1 = 17
  EXPECT_TRUE(all_equal(applied(data::CenterCrop({1, 1, 2}), x), tensor<float>({17, 18}, {1, 1, 1, 2})));
  EXPECT_KILN_ERROR(applied(data::CenterCrop({4, 1, 1}), x), "cannot take [4, 1, 1] voxels", "[1, 3, 3, 4]");
  std::set<float> corners;
  for (uint64_t seed = 0; seed < 200; ++seed)
    corners.insert(applied(data::RandomCrop({2, 2, 2}), x, seed).reshape({-1}).to_vector<float>()[0]);
  EXPECT_EQ(corners, (std::set<float>{0, 1, 2, 4, 5, 6, 12, 13, 14, 16, 17, 18}));  // every start reached
  const Tensor padded = applied(data::Pad({3, 2, 1}, 7), full({1, 1, 1, 1}, 5.0));
  EXPECT_TRUE(all_equal(padded, tensor<float>({7, 7, 5, 7, 7, 7}, {1, 3, 2, 1})));
  EXPECT_TRUE(all_equal(applied(data::Pad({1, 1, 1}), x), x));  // already large enough
}

TEST(Transforms, IntensityDrawsStayInTheirRanges) {
  const Tensor ones_volume = ones({1, 2, 2, 2});
  for (uint64_t seed = 0; seed < 20; ++seed) {
    const float s = applied(data::RandomIntensityScale(0.5, 2.0), ones_volume, seed).max().item<float>();
    EXPECT_GE(s, 0.5f);
    EXPECT_LT(s, 2.0f);
    const float t = applied(data::RandomIntensityShift(-1, 1), ones_volume, seed).min().item<float>();
    EXPECT_GE(t, 0.0f);
    EXPECT_LT(t, 2.0f);
    const float u = applied(data::MedMnistShapeTransform(true), ones_volume, seed).max().item<float>();
    EXPECT_GE(u, 0.0f);
    EXPECT_LT(u, 1.0f);
  }
  EXPECT_TRUE(all_equal(applied(data::MedMnistShapeTransform(false), ones_volume), full({1, 2, 2, 2}, 0.5)));
  // noise: zero mean, the given std over 10^5 voxels
  const Tensor noise = applied(data::RandomGaussianNoise(0.3), zeros({1, 100, 100, 10}));
  EXPECT_NEAR(noise.mean().item<float>(), 0.0, 0.005);
  EXPECT_NEAR(std::sqrt(square(noise).mean().item<float>()), 0.3, 0.005);
  EXPECT_TRUE(all_equal(applied(data::RandomGaussianNoise(0.3, 0.0), ones_volume), ones_volume));
  // gamma keeps the range and, at 1, the values; at 2 it is the squared ramp
  const Tensor ramp = tensor<float>({1, 2, 3}, {1, 1, 1, 3});
  EXPECT_TRUE(all_close(applied(data::RandomGamma(1, 1), ramp), ramp));
  EXPECT_TRUE(all_close(applied(data::RandomGamma(2, 2), ramp), tensor<float>({1, 1.5f, 3}, {1, 1, 1, 3})));
  EXPECT_KILN_ERROR(data::RandomGamma(0, 1), "0 < low <= high");
}

TEST(Transforms, ComposeRunsInOrderAndNamesItsParts) {
  const data::Compose both(
      {std::make_shared<data::ToFloat>(0.5), std::make_shared<data::MedMnistShapeTransform>(false)});
  EXPECT_EQ(both.name(), "Compose(ToFloat, MedMnistShapeTransform(eval))");
  EXPECT_TRUE(
      all_equal(applied(both, full({1, 1, 1, 2}, 4, {.dtype = DType::UInt8})), full({1, 1, 1, 2}, 1.0)));
  EXPECT_KILN_ERROR(applied(data::ToFloat(1.0, {"label"}), ones({1, 1, 1, 1})),
                    "ToFloat: the sample has no tensor 'label'");
}

}  // namespace
}  // namespace kiln
