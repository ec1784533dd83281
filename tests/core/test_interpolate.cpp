// interpolate (core/ops/interpolate.h): outputs and input gradients equal PyTorch's
// F.interpolate for linear, bilinear and trilinear (with and without align_corners) and
// nearest, by size and by non-integer scale factors (tests/core/interpolate/
// make_fixtures.py, torch 2.15); float64 gradient checks; dtypes; bad arguments.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/ops.h"
#include "data/npz.h"
#include "tests/gradcheck.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

using testing::gradcheck;

struct Case {
  std::string name;
  InterpolateOptions options;
};

const std::vector<Case> kCases = {
    {"linear_size", {.size = {11}, .mode = InterpolateMode::Linear}},
    {"linear_corners", {.size = {4}, .mode = InterpolateMode::Linear, .align_corners = true}},
    {"bilinear_scale", {.scale_factor = {1.7, 0.6}, .mode = InterpolateMode::Linear}},
    {"bilinear_corners", {.size = {9, 3}, .mode = InterpolateMode::Linear, .align_corners = true}},
    {"trilinear_size", {.size = {6, 3, 7}, .mode = InterpolateMode::Linear}},
    {"trilinear_scale", {.scale_factor = {2.5}, .mode = InterpolateMode::Linear}},
    {"trilinear_corners", {.size = {7, 2, 5}, .mode = InterpolateMode::Linear, .align_corners = true}},
    {"nearest_size", {.size = {7, 3, 8}}},
    {"nearest_scale", {.scale_factor = {0.7, 1.9}}},
    {"nearest_exact_size", {.size = {4, 3, 10}, .mode = InterpolateMode::NearestExact}},
    {"nearest_exact_scale", {.scale_factor = {0.5, 1.3}, .mode = InterpolateMode::NearestExact}},
};

TEST(Interpolate, OutputsAndGradientsMatchPyTorch) {
  const data::npz::File fixture(std::string(KILN_SOURCE_DIR) + "/tests/core/interpolate/interpolate.npz");
  const testing::Tolerance tol{1e-12, 1e-12};
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.name);
    const Tensor x = fixture.load(c.name + "_input").detach().requires_grad_(true);
    const Tensor y = interpolate(x, c.options);
    EXPECT_TRUE(testing::all_close(y, fixture.load(c.name + "_output"), tol));
    mul(y, fixture.load(c.name + "_weights")).sum().backward();
    EXPECT_TRUE(testing::all_close(x.grad(), fixture.load(c.name + "_grad"), tol));
  }
}

TEST(Interpolate, DtypesAndDevicesOfTheResult) {
  const Tensor x = testing::random_for({1, 2, 3, 4}, DType::Float32, 3);
  EXPECT_EQ(interpolate(x, {.size = {5, 5}, .mode = InterpolateMode::Linear}).dtype(), DType::Float32);
  // Half types blend in float32 and come back in their own dtype.
  const Tensor half = x.to(DType::BFloat16);
  const Tensor blended = interpolate(half, {.size = {5, 5}, .mode = InterpolateMode::Linear});
  EXPECT_EQ(blended.dtype(), DType::BFloat16);
  EXPECT_TRUE(testing::all_close(
      blended.to(DType::Float32),
      interpolate(half.to(DType::Float32), {.size = {5, 5}, .mode = InterpolateMode::Linear}),
      testing::tolerance_for(DType::BFloat16)));
  // Nearest keeps integer dtypes; a same-size linear resample is the identity.
  const Tensor labels = randint(0, 5, {1, 1, 3, 3}, {.dtype = DType::Int64});
  EXPECT_EQ(interpolate(labels, {.scale_factor = {2}}).dtype(), DType::Int64);
  EXPECT_TRUE(testing::all_equal(interpolate(x, {.size = {3, 4}, .mode = InterpolateMode::Linear}), x));
}

TEST(Interpolate, BadArgumentsAreErrors) {
  const Tensor x = zeros({1, 1, 4, 4});
  EXPECT_KILN_ERROR(interpolate(zeros({4, 4}), {.size = {2}}), "interpolate", "1 to 3 spatial dims");
  EXPECT_KILN_ERROR(interpolate(x, {}), "exactly one of size and scale_factor");
  EXPECT_KILN_ERROR(interpolate(x, {.size = {2, 2}, .scale_factor = {2}}),
                    "exactly one of size and scale_factor");
  EXPECT_KILN_ERROR(interpolate(x, {.size = {2, 2, 2}}), "3 sizes or factors for 2 spatial dims");
  EXPECT_KILN_ERROR(interpolate(x, {.size = {2, 0}}), "must be positive");
  EXPECT_KILN_ERROR(interpolate(x, {.scale_factor = {-1}}), "must be positive");
  EXPECT_KILN_ERROR(interpolate(x, {.scale_factor = {0.1}}), "gives 0 voxels");
  EXPECT_KILN_ERROR(interpolate(x, {.size = {2, 2}, .align_corners = true}),
                    "align_corners applies to linear");
  EXPECT_KILN_ERROR(
      interpolate(zeros({1, 1, 4}, {.dtype = DType::Int64}), {.size = {2}, .mode = InterpolateMode::Linear}),
      "need a floating input");
  EXPECT_KILN_ERROR(interpolate(zeros({1, 1, 0, 4}), {.size = {2, 2}}), "empty spatial dim");
}

using Inputs = std::vector<Tensor>;

KILN_GRADCHECK_TEST(interpolate) {
  for (const bool corners : {false, true}) {
    const InterpolateOptions trilinear{
        .size = {3, 4, 2}, .mode = InterpolateMode::Linear, .align_corners = corners};
    EXPECT_TRUE(gradcheck([&](const Inputs& v) { return interpolate(v[0], trilinear); },
                          {testing::grad_leaf({1, 2, 2, 3, 3}, 1)}));
    EXPECT_TRUE(gradcheck([&](const Inputs& v) { return interpolate(v[0], trilinear); },
                          {testing::strided_grad_leaf({1, 2, 2, 3, 3}, 2)}));
  }
  const InterpolateOptions nearest{.scale_factor = {1.6, 0.7}};
  EXPECT_TRUE(gradcheck([&](const Inputs& v) { return interpolate(v[0], nearest); },
                        {testing::grad_leaf({2, 1, 3, 4}, 3)}));
}

}  // namespace
}  // namespace kiln
