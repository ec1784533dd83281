// Elastic deformation (data/elastic.h, data/resample.h's displacement_resample) equals
// MONAI's Rand3DElastic (padding "zeros") given the noise it drew, trilinear and nearest
// (tests/data/elastic/make_fixtures.py, monai 1.6.1); a zero field leaves the volume as it
// is; the transform moves image and label together and follows the sample's generator.
#include <gtest/gtest.h>

#include <string>

#include "core/ops.h"
#include "data/elastic.h"
#include "data/npz.h"
#include "data/resample.h"
#include "tests/test_util.h"

namespace kiln::data {
namespace {

const npz::File& fixture() {
  static const npz::File file(std::string(KILN_SOURCE_DIR) + "/tests/data/elastic/elastic.npz");
  return file;
}

TEST(Elastic, DeformationEqualsMonaisForItsNoise) {
  const std::vector<std::tuple<double, double, Interpolation>> cases = {{1.5, 2.0, Interpolation::Linear},
                                                                        {2.5, 4.0, Interpolation::Linear},
                                                                        {1.5, 3.0, Interpolation::Nearest}};
  for (size_t k = 0; k < cases.size(); ++k) {
    SCOPED_TRACE(k);
    const auto [sigma, magnitude, mode] = cases[k];
    const Tensor displacement =
        elastic_displacement(fixture().load("noise_" + std::to_string(k)), sigma, magnitude);
    const Tensor out =
        displacement_resample(fixture().load("volume_" + std::to_string(k)), displacement, {}, mode);
    const Tensor expected = fixture().load("deformed_" + std::to_string(k));
    if (mode == Interpolation::Nearest) {
      // a voxel whose source lands within float32 rounding of a half may round the other
      // way; all but a handful agree exactly
      const double agree = eq(out, expected).to(DType::Float64).mean().item<double>();
      EXPECT_GT(agree, 0.995);
    } else {
      EXPECT_TRUE(testing::all_close(out, expected, {2e-5, 2e-4}));
    }
  }
}

TEST(Elastic, AZeroFieldChangesNothing) {
  const Tensor v = testing::random_for({2, 5, 6, 7}, DType::Float32, 1);
  EXPECT_TRUE(testing::all_close(displacement_resample(v, zeros({3, 5, 6, 7}), {}, Interpolation::Linear), v,
                                 {1e-7, 1e-7}));
  EXPECT_TRUE(
      testing::all_equal(displacement_resample(v, zeros({3, 5, 6, 7}), {}, Interpolation::Nearest), v));
  EXPECT_KILN_ERROR(displacement_resample(v, zeros({3, 5, 6, 6}), {}, Interpolation::Linear),
                    "displacement_resample", "[3, D, H, W]");
}

TEST(Elastic, TheTransformMovesImageAndLabelTogether) {
  Sample s;
  s.tensors[kImage] = arange(8 * 9 * 10, {.dtype = DType::Float32}).reshape({1, 8, 9, 10});
  s.tensors[kLabel] = arange(8 * 9 * 10, {.dtype = DType::Int64}).reshape({1, 8, 9, 10});
  Sample again = s;
  const RandomElasticDeform deform({.sigma_range = {1.0, 2.0},
                                    .magnitude_range = {20.0, 30.0},
                                    .keys = {kImage},
                                    .nearest_keys = {kLabel}});
  Generator g1 = sample_generator(4, 0, 3), g2 = sample_generator(4, 0, 3);
  deform.apply(s, g1);
  deform.apply(again, g2);
  EXPECT_TRUE(testing::all_equal(s.at(kImage), again.at(kImage)));
  EXPECT_EQ(s.at(kLabel).dtype(), DType::Int64);
  EXPECT_FALSE(
      testing::all_equal(s.at(kLabel), arange(8 * 9 * 10, {.dtype = DType::Int64}).reshape({1, 8, 9, 10})));
  // the label map's values are voxel indices: every one is a voxel of the original, or 0
  const Tensor labels = s.at(kLabel);
  EXPECT_TRUE(testing::all_equal(logical_and(ge(labels, 0), lt(labels, 720)),
                                 ones_like(labels, {.dtype = DType::Bool})));
  EXPECT_KILN_ERROR(RandomElasticDeform({.sigma_range = {2.0, 1.0}}), "RandomElasticDeform", "sigma range");
  EXPECT_KILN_ERROR(RandomElasticDeform({.rotate_range = {-0.1, 0, 0}}), "RandomElasticDeform", ">= 0");
}

// Displacement and affine map in one pass: with no displacement it is affine_resample
// exactly (one sampler); a constant displacement d is the affine map's offset moved by -d.
TEST(Elastic, TheAffinePartComposesInTheSamePass) {
  const Tensor v = testing::random_for({1, 7, 6, 8}, DType::Float32, 3);
  const VoxelAffine map = RandomAffine::map_of({0.3, -0.2, 0.1}, {1.1, 0.9, 1.0}, {0.5, -1.0, 0.25});
  for (Interpolation mode : {Interpolation::Linear, Interpolation::Nearest}) {
    EXPECT_TRUE(testing::all_equal(displacement_resample(v, zeros({3, 7, 6, 8}), map, mode),
                                   affine_resample(v, map, mode)));
    const Tensor d = stack({full({7, 6, 8}, 0.75), full({7, 6, 8}, -0.5), full({7, 6, 8}, 1.25)});
    VoxelAffine moved = map;
    moved.offset = {map.offset[0] - 0.75, map.offset[1] + 0.5, map.offset[2] - 1.25};
    EXPECT_TRUE(testing::all_close(displacement_resample(v, d, map, mode), affine_resample(v, moved, mode),
                                   {1e-6, 1e-6}));
  }
  // the transform with an affine range changes the volume even when the field is zero
  Sample s;
  s.tensors[kImage] = v;
  Generator g(2);
  RandomElasticDeform({.magnitude_range = {0.0, 0.0}, .rotate_range = {0.4, 0.4, 0.4}}).apply(s, g);
  EXPECT_FALSE(testing::all_close(s.at(kImage), v, {1e-3, 1e-3}));
}

}  // namespace
}  // namespace kiln::data
