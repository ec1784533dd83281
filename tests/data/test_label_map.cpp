// read_label_map (data/label_map.h): a label map on its image's grid reads as int64 and
// reorients as the image does; another grid, another affine, several channels, fractions,
// negatives, NaN and labels outside the classes are errors naming the files; labels_in.
#include <gtest/gtest.h>

#include <string>

#include "core/ops.h"
#include "data/label_map.h"
#include "data/nifti.h"
#include "data/volume_file.h"
#include "tests/test_util.h"

namespace kiln::data {
namespace {

using testing::TempFolder;

const std::array<std::array<double, 4>, 4> kLps{
    {{-1.5, 0, 0, 10}, {0, -1.5, 0, 20}, {0, 0, 2.0, -5}, {0, 0, 0, 1}}};

TEST(LabelMap, ALabelMapOnItsImagesGridReadsAsInt64) {
  TempFolder folder;
  const Tensor image = testing::random_for({4, 5, 6}, DType::Float32, 1);
  Tensor labels = zeros({4, 5, 6}, {.dtype = DType::Int64});
  labels.narrow(0, 1, 2).narrow(1, 1, 3).fill_(2);
  labels.narrow(2, 4, 2).fill_(1);
  nifti::write(folder.file("image.nii.gz"), image, {.affine = kLps});
  nifti::write(folder.file("label.nii.gz"), labels.to(DType::UInt8), {.affine = kLps});
  const Tensor read =
      read_label_map(folder.file("label.nii.gz"), folder.file("image.nii.gz"), {.classes = 3});
  EXPECT_EQ(read.dtype(), DType::Int64);
  EXPECT_TRUE(testing::all_equal(read, labels.unsqueeze(0)));
  EXPECT_EQ(labels_in(read), (std::vector<int64_t>{0, 1, 2}));
  // reoriented to RAS+ as the image is: the same voxels stay together
  const Tensor ras_image = load_volume(folder.file("image.nii.gz"), {.reorient_to_ras = true});
  const Tensor ras_labels =
      read_label_map(folder.file("label.nii.gz"), folder.file("image.nii.gz"), {.reorient_to_ras = true});
  const Tensor expected_pairs =
      stack({load_volume(folder.file("image.nii.gz")).flatten(), labels.to(DType::Float32).flatten()});
  EXPECT_EQ(ras_labels.sizes(), ras_image.sizes());
  EXPECT_DOUBLE_EQ(sum(mul(ras_image, ras_labels.to(DType::Float32))).item<double>(),
                   sum(mul(image, labels.to(DType::Float32))).item<double>());
}

TEST(LabelMap, HostileLabelFilesAreErrorsNamingTheFiles) {
  TempFolder folder;
  nifti::write(folder.file("image.nii"), zeros({4, 5, 6}), {.affine = kLps});
  const std::string image = folder.file("image.nii");
  const auto label_file = [&](const std::string& name, const Tensor& data,
                              const std::array<std::array<double, 4>, 4>& affine = kLps) {
    nifti::write(folder.file(name), data, {.affine = affine});
    return folder.file(name);
  };
  EXPECT_KILN_ERROR(read_label_map(label_file("grid.nii", zeros({4, 5, 7})), image), "grid.nii", "image.nii",
                    "[4, 5, 7]", "[4, 5, 6]");
  auto moved = kLps;
  moved[0][3] += 0.75;  // half a voxel to the side
  EXPECT_KILN_ERROR(read_label_map(label_file("moved.nii", zeros({4, 5, 6}), moved), image), "moved.nii",
                    "different affines");
  EXPECT_KILN_ERROR(read_label_map(label_file("channels.nii", zeros({2, 4, 5, 6})), image), "channels.nii",
                    "2 channels");
  EXPECT_KILN_ERROR(read_label_map(label_file("fraction.nii", full({4, 5, 6}, 0.5)), image), "fraction.nii",
                    "holds 0.5", "not a class number");
  EXPECT_KILN_ERROR(read_label_map(label_file("negative.nii", full({4, 5, 6}, -1.0)), image), "negative.nii",
                    "holds -1");
  EXPECT_KILN_ERROR(read_label_map(label_file("nan.nii", full({4, 5, 6}, NAN)), image), "nan.nii",
                    "120 NaN or infinite voxels");
  EXPECT_KILN_ERROR(read_label_map(label_file("many.nii", full({4, 5, 6}, 4.0)), image, {.classes = 3}),
                    "many.nii", "label 4 is outside the 3 classes");
  EXPECT_KILN_ERROR(read_label_map(folder.file("missing.nii"), image), "missing.nii");
}

}  // namespace
}  // namespace kiln::data
