// RandomCropByLabel (data/label_crop.h): the centre correction equals MONAI's
// correct_crop_centers on 300 random rows (tests/data/label_crop/make_fixtures.py, monai
// 1.6.1); crops lie inside, carry image and label together, are centred on the chosen
// group as often as its ratio says, and are reproducible from the sample's generator; bad
// arguments and label maps are errors.
#include <gtest/gtest.h>

#include <array>
#include <string>
#include <vector>

#include "core/ops.h"
#include "data/label_crop.h"
#include "data/npz.h"
#include "tests/test_util.h"

namespace kiln::data {
namespace {

TEST(LabelCrop, CentreCorrectionEqualsMonais) {
  const npz::File f(std::string(KILN_SOURCE_DIR) + "/tests/data/label_crop/label_crop.npz");
  const std::vector<int64_t> centers = f.load("centers").to_vector<int64_t>(),
                             sizes = f.load("sizes").to_vector<int64_t>(),
                             shapes = f.load("shapes").to_vector<int64_t>(),
                             expected = f.load("corrected").to_vector<int64_t>();
  ASSERT_EQ(centers.size(), 900u);
  for (size_t row = 0; row < centers.size() / 3; ++row) {
    const auto at = [&](const std::vector<int64_t>& v) {
      return std::array<int64_t, 3>{v[3 * row], v[3 * row + 1], v[3 * row + 2]};
    };
    EXPECT_EQ(corrected_crop_center(at(centers), at(sizes), at(shapes)), at(expected)) << "row " << row;
  }
}

// A 20 x 16 x 12 volume whose image holds each voxel's flat index, with a small foreground
// cube of class 1 and one of class 2, where no border voxel's corrected centre (for 5^3
// crops) falls.
Sample volume_with_labels() {
  Sample s;
  s.tensors[kImage] = arange(20 * 16 * 12, {.dtype = DType::Float32}).reshape({1, 20, 16, 12});
  Tensor label = zeros({1, 20, 16, 12}, {.dtype = DType::Int64});
  label.narrow(1, 6, 3).narrow(2, 6, 3).narrow(3, 6, 3).fill_(1);
  label.narrow(1, 15, 2).narrow(2, 10, 2).narrow(3, 4, 2).fill_(2);
  s.tensors[kLabel] = label;
  return s;
}

// Whether the crop's centre voxel (size / 2 along each axis) is labelled `group`
// (pos_neg: foreground means any class > 0).
int64_t centre_label(const Sample& s, const std::array<int64_t, 3>& size) {
  return s.tensors.at(kLabel)
      .select(1, size[0] / 2)
      .select(1, size[1] / 2)
      .select(1, size[2] / 2)
      .item<int64_t>();
}

TEST(LabelCrop, CropsCarryImageAndLabelTogetherInsideTheVolume) {
  const std::array<int64_t, 3> size{8, 6, 5};
  const RandomCropByLabel crop = RandomCropByLabel::pos_neg(size, 1.0, 1.0);
  for (int64_t i = 0; i < 50; ++i) {
    Sample s = volume_with_labels();
    const Sample original = volume_with_labels();
    Generator g = sample_generator(1, 0, i);
    crop.apply(s, g);
    const Tensor& image = s.tensors.at(kImage);
    ASSERT_EQ(image.sizes(), (Dims{1, 8, 6, 5}));
    ASSERT_EQ(s.tensors.at(kLabel).sizes(), (Dims{1, 8, 6, 5}));
    // the image's first voxel names the box's start; the label must be the same box's
    const auto first = static_cast<int64_t>(image.flatten().select(0, 0).item<float>());
    const int64_t d = first / (16 * 12), h = first / 12 % 16, w = first % 12;
    EXPECT_TRUE(testing::all_equal(
        s.tensors.at(kLabel),
        original.tensors.at(kLabel).narrow(1, d, 8).narrow(2, h, 6).narrow(3, w, 5).contiguous()));
  }
}

TEST(LabelCrop, CentresFollowTheRatios) {
  const std::array<int64_t, 3> size{5, 5, 5};  // odd: the centre voxel is the drawn one unless moved
  const auto fraction_foreground = [&](const RandomCropByLabel& crop, int64_t wanted) {
    int64_t hits = 0;
    const int64_t draws = 400;
    for (int64_t i = 0; i < draws; ++i) {
      Sample s = volume_with_labels();
      Generator g = sample_generator(7, 3, i);
      crop.apply(s, g);
      hits += (wanted < 0 ? centre_label(s, size) > 0 : centre_label(s, size) == wanted) ? 1 : 0;
    }
    return static_cast<double>(hits) / static_cast<double>(draws);
  };
  // the cubes lie at least size / 2 from the border, so a centre in them is never moved
  // out, and no moved background centre lands in them: 3:1 gives 0.75 foreground
  // (binomial sd 0.022 over 400 draws)
  EXPECT_NEAR(fraction_foreground(RandomCropByLabel::pos_neg(size, 3.0, 1.0), -1), 0.75, 0.08);
  EXPECT_EQ(fraction_foreground(RandomCropByLabel::pos_neg(size, 1.0, 0.0), -1), 1.0);
  EXPECT_EQ(fraction_foreground(RandomCropByLabel::pos_neg(size, 0.0, 1.0), -1), 0.0);
  EXPECT_NEAR(fraction_foreground(RandomCropByLabel::classes(size, {0.0, 1.0, 3.0}), 2), 0.75, 0.08);
  // a class with no voxel is never chosen: class 3 is absent
  EXPECT_EQ(fraction_foreground(RandomCropByLabel::classes(size, {0.0, 0.0, 1.0, 5.0}), 2), 1.0);
}

TEST(LabelCrop, TheSampleGeneratorDecidesTheCrop) {
  const RandomCropByLabel crop = RandomCropByLabel::pos_neg({6, 6, 6}, 1.0, 1.0);
  Sample a = volume_with_labels(), b = volume_with_labels();
  Generator ga = sample_generator(5, 1, 9), gb = sample_generator(5, 1, 9);
  crop.apply(a, ga);
  crop.apply(b, gb);
  EXPECT_TRUE(testing::all_equal(a.tensors.at(kImage), b.tensors.at(kImage)));
}

TEST(LabelCrop, BadArgumentsAndLabelMapsAreErrors) {
  EXPECT_KILN_ERROR(RandomCropByLabel::pos_neg({0, 4, 4}, 1, 1), "RandomCropByLabel", "positive");
  EXPECT_KILN_ERROR(RandomCropByLabel::pos_neg({4, 4, 4}, -1, 1), "RandomCropByLabel", "non-negative");
  EXPECT_KILN_ERROR(RandomCropByLabel::classes({4, 4, 4}, {0, 0}), "RandomCropByLabel", "all be 0");
  Generator g(1);
  Sample s = volume_with_labels();
  EXPECT_KILN_ERROR(RandomCropByLabel::pos_neg({30, 4, 4}, 1, 1).apply(s, g), "RandomCropByLabel",
                    "cannot take");
  EXPECT_KILN_ERROR(RandomCropByLabel::classes({4, 4, 4}, {1, 1}).apply(s, g), "RandomCropByLabel", "label 2",
                    "2 classes");
  // only the background has a ratio, and the volume has none: nothing to centre on
  Sample all_foreground = volume_with_labels();
  all_foreground.tensors[kLabel].fill_(1);
  EXPECT_KILN_ERROR(RandomCropByLabel::pos_neg({4, 4, 4}, 0, 1).apply(all_foreground, g), "RandomCropByLabel",
                    "no voxel");
  Sample other_grid = volume_with_labels();
  other_grid.tensors[kImage] = zeros({1, 20, 16, 13});
  EXPECT_KILN_ERROR(RandomCropByLabel::pos_neg({4, 4, 4}, 1, 1).apply(other_grid, g), "RandomCropByLabel",
                    "not on the label map's grid");
}

}  // namespace
}  // namespace kiln::data
