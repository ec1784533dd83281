// Resampling (data/resample.h) and the Resize / RandomAffine transforms: against numbers
// PyTorch produced (tests/data/resample/make_fixtures.py: F.interpolate for resize,
// affine_grid + grid_sample for the affine map), against exact results (identity, integer
// shifts, a quarter turn equal to RandomRotate90), dtypes (labels keep theirs), the
// draws' determinism and probability, and bad arguments.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <set>
#include <string>

#include "core/ops.h"
#include "data/npz.h"
#include "data/resample.h"
#include "data/transforms.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

using data::Interpolation;
using data::VoxelAffine;

const testing::Tolerance kFloat64{1e-12, 1e-12};

data::npz::File fixture(const std::string& name) {
  return data::npz::File(std::string(KILN_SOURCE_DIR) + "/tests/data/resample/" + name);
}

TEST(Resample, ResizeMatchesPyTorchsInterpolate) {
  const data::npz::File file = fixture("resize.npz");
  const Tensor input = file.load("input");
  for (const std::array<int64_t, 3>& size :
       {std::array<int64_t, 3>{3, 4, 9}, std::array<int64_t, 3>{8, 9, 4}}) {
    const std::string name =
        std::to_string(size[0]) + "_" + std::to_string(size[1]) + "_" + std::to_string(size[2]);
    SCOPED_TRACE(name);
    EXPECT_TRUE(testing::all_close(data::resize(input, size, Interpolation::Linear),
                                   file.load("trilinear_" + name), kFloat64));
    EXPECT_TRUE(
        testing::all_equal(data::resize(input, size, Interpolation::Nearest), file.load("nearest_" + name)));
    // float32 in, float32 out, to float32 rounding.
    EXPECT_TRUE(testing::all_close(data::resize(input.to(DType::Float32), size, Interpolation::Linear),
                                   file.load("trilinear_" + name).to(DType::Float32)));
  }
}

TEST(Resample, AffineResampleMatchesPyTorchsGridSample) {
  const data::npz::File file = fixture("affine.npz");
  const Tensor matrix = file.load("matrix"), offset = file.load("offset");
  VoxelAffine map;
  for (int64_t i = 0; i < 3; ++i) {
    for (int64_t j = 0; j < 3; ++j)
      map.matrix[size_t(i)][size_t(j)] = matrix.select(0, i).select(0, j).item<double>();
    map.offset[size_t(i)] = offset.select(0, i).item<double>();
  }
  const Tensor input = file.load("input");
  EXPECT_TRUE(testing::all_close(data::affine_resample(input, map, Interpolation::Linear),
                                 file.load("trilinear"), kFloat64));
  EXPECT_TRUE(
      testing::all_equal(data::affine_resample(input, map, Interpolation::Nearest), file.load("nearest")));
}

TEST(Resample, IdentityAndIntegerShiftsAreExact) {
  const Tensor volume = testing::random_for({2, 4, 5, 6}, DType::Float32, 3);
  EXPECT_TRUE(testing::all_equal(data::resize(volume, {4, 5, 6}, Interpolation::Linear), volume));
  EXPECT_TRUE(testing::all_equal(data::affine_resample(volume, {}, Interpolation::Linear), volume));
  // Content moved by +1 along axis 0 and -2 along axis 2: out[z, y, x] = in[z - 1, y, x + 2].
  VoxelAffine shift;
  shift.offset = {1, 0, -2};
  Tensor expected = zeros({2, 4, 5, 6});
  expected.slice(1, 1, 4).slice(3, 0, 4).copy_(volume.slice(1, 0, 3).slice(3, 2, 6));
  EXPECT_TRUE(testing::all_equal(data::affine_resample(volume, shift, Interpolation::Linear), expected));
  EXPECT_TRUE(testing::all_equal(data::affine_resample(volume, shift, Interpolation::Nearest), expected));
}

TEST(Resample, LabelsKeepTheirDtypeAndClassesAndIntegersBecomeFloat) {
  const Tensor labels = randint(0, 4, {1, 5, 5, 5}, {.dtype = DType::Int64});
  const Tensor resized = data::resize(labels, {9, 3, 7}, Interpolation::Nearest);
  EXPECT_EQ(resized.dtype(), DType::Int64);
  const VoxelAffine turn = data::RandomAffine::map_of({0.4, 0, 0}, {1, 1, 1}, {0, 0, 0});
  const Tensor turned = data::affine_resample(labels, turn, Interpolation::Nearest);
  EXPECT_EQ(turned.dtype(), DType::Int64);
  for (const Tensor& t : {resized, turned}) {
    for (int64_t v : t.to_vector<int64_t>()) EXPECT_TRUE(v >= 0 && v < 4) << v;
  }
  const Tensor bytes = full({1, 2, 2, 2}, 200, {.dtype = DType::UInt8});
  const Tensor smooth = data::resize(bytes, {3, 3, 3}, Interpolation::Linear);
  EXPECT_EQ(smooth.dtype(), DType::Float32);
  EXPECT_TRUE(testing::all_equal(smooth, full({1, 3, 3, 3}, 200.0)));
  EXPECT_EQ(data::resize(bytes.to(DType::Float16), {3, 3, 3}, Interpolation::Linear).dtype(), DType::Float16);
}

// A quarter turn about axis 0 is numpy's rot90 in the plane (1, 2), RandomRotate90's k = 1.
TEST(Resample, AQuarterTurnIsRandomRotate90) {
  const Tensor volume = testing::random_for({1, 3, 5, 5}, DType::Float64, 8);
  data::Sample rotated{.tensors = {{"image", volume}}, .metadata = {}};
  Generator generator(1);
  data::RandomRotate90({1, 2}, {1}).apply(rotated, generator);
  const VoxelAffine turn = data::RandomAffine::map_of({std::numbers::pi / 2, 0, 0}, {1, 1, 1}, {0, 0, 0});
  EXPECT_TRUE(testing::all_close(data::affine_resample(volume, turn, Interpolation::Linear),
                                 rotated.tensors["image"], kFloat64));
  EXPECT_TRUE(testing::all_equal(data::affine_resample(volume, turn, Interpolation::Nearest),
                                 rotated.tensors["image"]));
}

TEST(RandomAffineTransform, ADrawIsAFunctionOfTheGeneratorAndMovesImageAndLabelAlike) {
  const data::RandomAffine affine({.rotate_range = {0.5, 0.5, 0.5},
                                   .scale_range = {0.2, 0.2, 0.2},
                                   .translate_range = {2, 2, 2},
                                   .keys = {"image"},
                                   .nearest_keys = {"label"}});
  const Tensor image = testing::random_for({1, 6, 6, 6}, DType::Float32, 4);
  // A label equal to the image's sign: after the same map, label 1 sits where the image is > 0.
  const Tensor label = gt(image, 0.0).to(DType::Int64);
  auto run = [&](uint64_t seed) {
    data::Sample sample{.tensors = {{"image", image}, {"label", label}}, .metadata = {}};
    Generator generator(seed);
    affine.apply(sample, generator);
    return sample;
  };
  const data::Sample a = run(5), b = run(5), c = run(6);
  EXPECT_TRUE(testing::bitwise_equal(a.tensors.at("image"), b.tensors.at("image")));
  EXPECT_FALSE(testing::all_equal(a.tensors.at("image"), c.tensors.at("image")));
  EXPECT_EQ(a.tensors.at("label").dtype(), DType::Int64);
  // The nearest label follows the image: where the label moved a 1, the image there was
  // read near a positive voxel. Checked loosely: most labelled voxels see a positive image.
  const Tensor moved_image = a.tensors.at("image"), moved_label = a.tensors.at("label");
  const double labelled = moved_label.sum().item<double>();
  const double agreeing =
      mul(moved_label.to(DType::Float32), gt(moved_image, 0.0).to(DType::Float32)).sum().item<double>();
  ASSERT_GT(labelled, 10);
  EXPECT_GT(agreeing / labelled, 0.7);
}

TEST(RandomAffineTransform, ProbabilityPChangesAboutThatShareOfSamples) {
  const data::RandomAffine affine({.rotate_range = {0.3, 0, 0}, .p = 0.3});
  const Tensor image = testing::random_for({1, 4, 4, 4}, DType::Float32, 2);
  int changed = 0;
  const int draws = 400;
  for (int i = 0; i < draws; ++i) {
    data::Sample sample{.tensors = {{"image", image}}, .metadata = {}};
    Generator generator(static_cast<uint64_t>(1000 + i));
    affine.apply(sample, generator);
    changed += testing::all_equal(sample.tensors["image"], image) ? 0 : 1;
  }
  // Binomial(400, 0.3): mean 120, standard deviation 9.2; five of them either way.
  EXPECT_NEAR(changed, 120, 46);
  const data::RandomAffine never({.rotate_range = {0.3, 0, 0}, .p = 0});
  data::Sample sample{.tensors = {{"image", image}}, .metadata = {}};
  Generator generator(7);
  never.apply(sample, generator);
  EXPECT_TRUE(testing::all_equal(sample.tensors["image"], image));
}

TEST(Resample, BadArgumentsAreErrors) {
  const Tensor volume = ones({1, 2, 2, 2});
  EXPECT_KILN_ERROR(data::resize(ones({2, 2, 2}), {2, 2, 2}, Interpolation::Linear), "resize",
                    "[C, D, H, W]");
  EXPECT_KILN_ERROR(data::resize(volume, {2, 0, 2}, Interpolation::Linear), "resize", "positive");
  EXPECT_KILN_ERROR(data::resize(zeros({1, 0, 2, 2}), {2, 2, 2}, Interpolation::Linear), "resize", "empty");
  VoxelAffine bad;
  bad.matrix[1][2] = std::nan("");
  EXPECT_KILN_ERROR(data::affine_resample(volume, bad, Interpolation::Linear), "affine_resample", "finite");
  EXPECT_KILN_ERROR(data::Resize({2, -1, 2}), "Resize", "positive");
  EXPECT_KILN_ERROR(data::RandomAffine({.scale_range = {1.5, 0, 0}}), "RandomAffine", "scale");
  EXPECT_KILN_ERROR(data::RandomAffine({.p = 2}), "RandomAffine", "p must be");
  data::Sample flat{.tensors = {{"image", ones({4, 4})}}, .metadata = {}};
  Generator generator(1);
  EXPECT_KILN_ERROR(data::Resize({2, 2, 2}).apply(flat, generator), "Resize", "[C, D, H, W]");
}

}  // namespace
}  // namespace kiln
