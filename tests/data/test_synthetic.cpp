// SyntheticShapes and SyntheticSegmentation (data/synthetic.h): shapes and dtypes,
// samples as pure functions of (options, index), every class drawn, noise-free volumes
// holding exactly their 0/1 shape (a ball's voxel count near 4/3 pi r^3 on average) or
// their label map's intensities, and option errors.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/ops.h"
#include "data/synthetic.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

using data::SyntheticShapes;

TEST(SyntheticShapes, SamplesArePureFunctionsOfOptionsAndIndex) {
  const SyntheticShapes shapes({.size = 10, .side = 16, .seed = 3});
  EXPECT_EQ(shapes.size(), 10);
  const data::Sample s = shapes.get(4);
  EXPECT_EQ(s.at("image").sizes(), (std::vector<int64_t>{1, 16, 16, 16}));
  EXPECT_EQ(s.at("image").dtype(), DType::Float32);
  EXPECT_EQ(s.at("label").dtype(), DType::Int64);
  EXPECT_TRUE(testing::all_equal(shapes.get(4).at("image"),
                                 SyntheticShapes({.size = 10, .seed = 3}).get(4).at("image")));
  EXPECT_FALSE(
      testing::all_equal(s.at("image"), SyntheticShapes({.size = 10, .seed = 4}).get(4).at("image")));
  EXPECT_FALSE(testing::all_equal(s.at("image"), shapes.get(5).at("image")));
  EXPECT_KILN_ERROR(shapes.get(10), "SyntheticShapes: index 10 is out of range for 10 samples");
  EXPECT_KILN_ERROR(SyntheticShapes({.side = 4}), "side must be >= 8");
}

TEST(SyntheticShapes, EveryClassAndNoiseFreeShapes) {
  const SyntheticShapes shapes({.size = 300, .side = 16, .noise = 0, .seed = 1});
  int64_t counts[3] = {0, 0, 0};
  double ball_voxels = 0, ball_expected = 0;
  for (int64_t i = 0; i < shapes.size(); ++i) {
    const data::Sample s = shapes.get(i);
    const int64_t label = s.at("label").item<int64_t>();
    ASSERT_TRUE(label >= 0 && label < 3);
    ++counts[label];
    const Tensor image = s.at("image");
    EXPECT_TRUE(testing::all_equal(logical_or(eq(image, 0.0), eq(image, 1.0)),
                                   ones_like(image, {.dtype = DType::Bool})));
    const double voxels = image.sum().item<double>();
    EXPECT_GT(voxels, 0);
    if (label == 0) {
      ball_voxels += voxels;
      ball_expected += 4.0 / 3.0 * M_PI * 4.0 * 4.0 * 4.0;  // radius 3 to 5: about r = 4 on average
    }
  }
  for (int64_t c = 0; c < 3; ++c) EXPECT_GT(counts[c], 75) << "class " << c;
  EXPECT_NEAR(ball_voxels / ball_expected, 1.0, 0.2);
}

TEST(SyntheticSegmentation, LabelMapsMarkTheShapesInTheImage) {
  const data::SyntheticSegmentation volumes(
      {.size = 20, .shape = {24, 20, 28}, .classes = 3, .noise = 0, .seed = 2});
  std::vector<int64_t> voxels(4, 0);
  for (int64_t i = 0; i < volumes.size(); ++i) {
    const data::Sample s = volumes.get(i);
    const Tensor image = s.at("image"), label = s.at("label");
    ASSERT_EQ(image.sizes(), (Dims{1, 24, 20, 28}));
    ASSERT_EQ(label.sizes(), (Dims{1, 24, 20, 28}));
    ASSERT_EQ(label.dtype(), DType::Int64);
    // without noise the image is the label's intensity: 0 outside, 0.5 + 0.5 c inside
    const Tensor expected =
        where(eq(label, 0), zeros_like(image), add(mul(label.to(DType::Float32), 0.5), 0.5));
    EXPECT_TRUE(testing::all_equal(image, expected));
    for (int64_t c = 0; c <= 3; ++c) voxels[static_cast<size_t>(c)] += eq(label, c).sum().item<int64_t>();
  }
  for (int64_t c = 1; c <= 3; ++c) EXPECT_GT(voxels[static_cast<size_t>(c)], 500) << "class " << c;
  EXPECT_GT(voxels[0], voxels[1] + voxels[2] + voxels[3]);  // mostly background
  // a pure function of the options and the index, with noise too
  const data::SyntheticSegmentation noisy({.size = 4, .seed = 9});
  EXPECT_TRUE(testing::all_equal(noisy.get(3).at("image"),
                                 data::SyntheticSegmentation({.size = 4, .seed = 9}).get(3).at("image")));
  EXPECT_FALSE(testing::all_equal(noisy.get(3).at("image"), noisy.get(2).at("image")));
  EXPECT_KILN_ERROR(data::SyntheticSegmentation({.shape = {4, 32, 32}}), "SyntheticSegmentation",
                    "[8, 4096]");
  EXPECT_KILN_ERROR(data::SyntheticSegmentation({.classes = 0}), "SyntheticSegmentation", "classes");
  EXPECT_KILN_ERROR(noisy.get(4), "index 4 is out of range");
}

}  // namespace
}  // namespace kiln
