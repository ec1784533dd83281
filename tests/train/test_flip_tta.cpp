// flip_averaged_probabilities (train/flip_tta.h): a flip-equivariant predictor gives its own
// probabilities back; a position-dependent one gives the mean over the 8 flips, computed
// here by hand; bad arguments are errors.
#include <gtest/gtest.h>

#include "core/ops.h"
#include "data/transform_util.h"
#include "tests/test_util.h"
#include "train/flip_tta.h"

namespace kiln::train {
namespace {

TEST(FlipTta, AnEquivariantPredictorIsItsOwnAverage) {
  const Tensor x = testing::random_for({2, 2, 4, 5, 3}, DType::Float64, 1);
  const auto pointwise = [](const Tensor& v) { return cat({v, mul(v, -0.5)}, 1); };  // voxel by voxel
  EXPECT_TRUE(testing::all_close(flip_averaged_probabilities(x, pointwise), softmax(pointwise(x), 1),
                                 {1e-15, 1e-14}));
}

TEST(FlipTta, AveragesEveryFlipFlippedBack) {
  const Tensor x = testing::random_for({1, 1, 3, 4, 2}, DType::Float64, 2);
  // a ramp along the first spatial axis makes the logits depend on position
  const Tensor ramp = arange(3, {.dtype = DType::Float64}).reshape({1, 1, 3, 1, 1});
  const auto biased = [&](const Tensor& v) { return cat({add(v, ramp), neg(v)}, 1); };
  Tensor expected = zeros({1, 2, 3, 4, 2}, {.dtype = DType::Float64});
  for (int mask = 0; mask < 8; ++mask) {
    Tensor in = x;
    for (int a = 0; a < 3; ++a) {
      if (mask & (1 << a)) in = data::flip(in, a + 2);
    }
    Tensor p = softmax(biased(in), 1);
    for (int a = 0; a < 3; ++a) {
      if (mask & (1 << a)) p = data::flip(p, a + 2);
    }
    expected = add(expected, div(p, 8.0));
  }
  const Tensor averaged = flip_averaged_probabilities(x, biased);
  EXPECT_TRUE(testing::all_close(averaged, expected, {1e-15, 1e-14}));
  EXPECT_FALSE(testing::all_close(averaged, softmax(biased(x), 1), {1e-6, 1e-6}));  // the flips mattered
  // one axis: 2 predictions
  int calls = 0;
  flip_averaged_probabilities(x,
                              [&](const Tensor& v) {
                                ++calls;
                                return biased(v);
                              },
                              {1});
  EXPECT_EQ(calls, 2);
}

TEST(FlipTta, BadArgumentsAreErrors) {
  const Tensor x = zeros({1, 1, 3, 3, 3});
  const auto id = [](const Tensor& v) { return v; };
  EXPECT_KILN_ERROR(flip_averaged_probabilities(x, id, {3}), "flip_averaged_probabilities",
                    "not a spatial axis");
  EXPECT_KILN_ERROR(flip_averaged_probabilities(x, id, {1, 1}), "flip_averaged_probabilities",
                    "at most once");
  EXPECT_KILN_ERROR(flip_averaged_probabilities(zeros({3, 3}), id), "flip_averaged_probabilities",
                    "[B, C, d...]");
  EXPECT_KILN_ERROR(flip_averaged_probabilities(x, [](const Tensor& v) { return v.sum(); }),
                    "flip_averaged_probabilities", "must return");
}

}  // namespace
}  // namespace kiln::train
