// foreground_box, crop_or_pad and CropForeground (data/foreground_crop.h) equal MONAI's
// generate_spatial_bounding_box and CropForeground, margins past the edge padded
// (tests/data/foreground_crop/make_fixtures.py, monai 1.6.1); the label follows the image
// and the box is recorded; no foreground keeps the volume; bad arguments are errors.
#include <gtest/gtest.h>

#include <string>

#include "core/ops.h"
#include "data/foreground_crop.h"
#include "data/npz.h"
#include "tests/test_util.h"

namespace kiln::data {
namespace {

const npz::File& fixture() {
  static const npz::File file(std::string(KILN_SOURCE_DIR) +
                              "/tests/data/foreground_crop/foreground_crop.npz");
  return file;
}

TEST(ForegroundCrop, BoxesAndCropsEqualMonais) {
  const std::array<std::array<int64_t, 3>, 3> margins{{{0, 0, 0}, {2, 1, 3}, {2, 2, 2}}};
  for (size_t k = 0; k < margins.size(); ++k) {
    SCOPED_TRACE(k);
    const Tensor v = fixture().load("volume_" + std::to_string(k));
    const ForegroundBox box = foreground_box(v, 0.0, margins[k]);
    const std::vector<int64_t> expected = fixture().load("box_" + std::to_string(k)).to_vector<int64_t>();
    EXPECT_EQ(
        std::vector<int64_t>({box.start[0], box.start[1], box.start[2], box.end[0], box.end[1], box.end[2]}),
        expected);
    Sample s;
    s.tensors[kImage] = v;
    s.tensors[kLabel] = gt(v, 0.0).to(DType::Int64);
    Generator g(1);
    CropForeground(margins[k]).apply(s, g);
    EXPECT_TRUE(testing::all_equal(s.at(kImage), fixture().load("cropped_" + std::to_string(k))));
    EXPECT_TRUE(testing::all_equal(s.at(kLabel), gt(s.at(kImage), 0.0).to(DType::Int64)));  // the same box
    EXPECT_EQ(s.metadata.at("foreground_box"),
              std::to_string(expected[0]) + "," + std::to_string(expected[3]) + "," +
                  std::to_string(expected[1]) + "," + std::to_string(expected[4]) + "," +
                  std::to_string(expected[2]) + "," + std::to_string(expected[5]));
  }
}

TEST(ForegroundCrop, NoForegroundKeepsTheVolume) {
  Sample s;
  s.tensors[kImage] = full({1, 4, 5, 6}, -1.0);
  s.tensors[kLabel] = zeros({1, 4, 5, 6}, {.dtype = DType::Int64});
  Generator g(1);
  CropForeground({2, 2, 2}).apply(s, g);
  EXPECT_EQ(s.at(kImage).sizes(), (Dims{1, 4, 5, 6}));
  EXPECT_EQ(s.metadata.at("foreground_box"), "0,4,0,5,0,6");
}

TEST(ForegroundCrop, BadArgumentsAreErrors) {
  EXPECT_KILN_ERROR(CropForeground({-1, 0, 0}), "CropForeground", "non-negative");
  EXPECT_KILN_ERROR(foreground_box(zeros({4, 4, 4}), 0, {0, 0, 0}), "foreground_box", "[C, D, H, W]");
  Sample s;
  s.tensors[kImage] = ones({1, 4, 4, 4});
  s.tensors[kLabel] = ones({1, 4, 4, 5});
  Generator g(1);
  EXPECT_KILN_ERROR(CropForeground().apply(s, g), "CropForeground", "not on the grid");
}

}  // namespace
}  // namespace kiln::data
