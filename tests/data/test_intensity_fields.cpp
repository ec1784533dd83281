// gaussian_smooth and bias_field (data/intensity_fields.h) equal MONAI's GaussianSmooth and
// RandBiasField field (tests/data/intensity_fields/make_fixtures.py, monai 1.6.1); the
// random transforms draw from the sample's generator, act with probability p and keep
// labels apart; bad arguments are errors.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/ops.h"
#include "data/intensity_fields.h"
#include "data/npz.h"
#include "tests/test_util.h"

namespace kiln::data {
namespace {

const npz::File& fixture() {
  static const npz::File file(std::string(KILN_SOURCE_DIR) +
                              "/tests/data/intensity_fields/intensity_fields.npz");
  return file;
}

TEST(IntensityFields, GaussianSmoothEqualsMonais) {
  const std::vector<std::array<double, 3>> sigmas = {{0.5, 1.0, 1.7}, {0.3, 0.3, 0.3}, {2.5, 0.8, 1.2}};
  const Tensor volume = fixture().load("volume");
  for (size_t k = 0; k < sigmas.size(); ++k) {
    SCOPED_TRACE(k);
    // MONAI's kernel taps are float32 (erf in float32); Kiln's float64 then rounded
    EXPECT_TRUE(testing::all_close(gaussian_smooth(volume, sigmas[k]),
                                   fixture().load("smooth_" + std::to_string(k)), {2e-6, 2e-5}));
  }
  // a float64 volume stays float64 and agrees
  EXPECT_EQ(gaussian_smooth(volume.to(DType::Float64), sigmas[0]).dtype(), DType::Float64);
}

TEST(IntensityFields, BiasFieldEqualsMonais) {
  const std::vector<std::pair<std::array<int64_t, 3>, int64_t>> fields = {
      {{12, 10, 9}, 3}, {{5, 7, 6}, 1}, {{4, 9, 11}, 2}};
  for (size_t k = 0; k < fields.size(); ++k) {
    SCOPED_TRACE(k);
    const std::vector<double> c = fixture().load("coefficients_" + std::to_string(k)).to_vector<double>();
    EXPECT_EQ(static_cast<int64_t>(c.size()), bias_field_coefficients(fields[k].second));
    EXPECT_TRUE(testing::all_close(bias_field(fields[k].first, fields[k].second, c),
                                   fixture().load("field_" + std::to_string(k)), {1e-6, 1e-6}));
  }
  EXPECT_EQ(bias_field_coefficients(3), 20);
}

Sample noisy_sample() {
  Sample s;
  s.tensors[kImage] = testing::random_for({1, 8, 9, 10}, DType::Float32, 5);
  s.tensors[kLabel] = zeros({1, 8, 9, 10}, {.dtype = DType::Int64});
  return s;
}

TEST(IntensityFields, RandomTransformsFollowTheGeneratorAndTheProbability) {
  for (const TransformPtr& t :
       std::vector<TransformPtr>{std::make_shared<RandomGaussianSmooth>(std::array{0.5, 1.5}, 1.0),
                                 std::make_shared<RandomBiasField>(3, std::array{0.0, 0.1}, 1.0)}) {
    SCOPED_TRACE(t->name());
    Sample a = noisy_sample(), b = noisy_sample(), c = noisy_sample();
    Generator ga = sample_generator(3, 0, 1), gb = sample_generator(3, 0, 1), gc = sample_generator(3, 0, 2);
    t->apply(a, ga);
    t->apply(b, gb);
    t->apply(c, gc);
    EXPECT_TRUE(testing::all_equal(a.at(kImage), b.at(kImage)));
    EXPECT_FALSE(testing::all_equal(a.at(kImage), c.at(kImage)));
    EXPECT_FALSE(testing::all_equal(a.at(kImage), noisy_sample().at(kImage)));
    EXPECT_TRUE(testing::all_equal(a.at(kLabel), noisy_sample().at(kLabel)));  // labels untouched
  }
  // p = 0 never acts
  Sample s = noisy_sample();
  Generator g(1);
  RandomBiasField(3, {0.0, 0.1}, 0.0).apply(s, g);
  RandomGaussianSmooth({0.5, 1.5}, 0.0).apply(s, g);
  EXPECT_TRUE(testing::all_equal(s.at(kImage), noisy_sample().at(kImage)));
}

TEST(IntensityFields, BadArgumentsAreErrors) {
  EXPECT_KILN_ERROR(gaussian_smooth(zeros({8, 8, 8}), {1, 1, 1}), "gaussian_smooth", "[C, D, H, W]");
  EXPECT_KILN_ERROR(gaussian_smooth(zeros({1, 8, 8, 8}), {1, 0, 1}), "gaussian_smooth", "positive");
  EXPECT_KILN_ERROR(gaussian_smooth(zeros({1, 8, 8, 8}, {.dtype = DType::Int64}), {1, 1, 1}),
                    "gaussian_smooth", "ToFloat");
  EXPECT_KILN_ERROR(bias_field({4, 4, 4}, 3, {0.1}), "bias_field", "takes 20 coefficients");
  EXPECT_KILN_ERROR(RandomBiasField(0, {0.0, 0.1}, 0.5), "RandomBiasField", "degree");
  EXPECT_KILN_ERROR(RandomGaussianSmooth({1.0, 0.5}, 0.5), "RandomGaussianSmooth", "ordered");
  EXPECT_KILN_ERROR(RandomGaussianSmooth({0.5, 1.0}, 1.5), "RandomGaussianSmooth", "p must be");
}

}  // namespace
}  // namespace kiln::data
