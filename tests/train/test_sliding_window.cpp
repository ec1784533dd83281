// sliding_window_inference (train/sliding_window.h) equals MONAI's on volumes larger and
// smaller than the window, with constant and Gaussian blending, windows batched across
// images (tests/train/sliding_window/make_fixtures.py, monai 1.6.1); the window starts and
// the importance map by their definitions; a whole-volume window is the predictor itself;
// bad arguments are errors.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/ops.h"
#include "data/npz.h"
#include "tests/test_util.h"
#include "train/sliding_window.h"

namespace kiln::train {
namespace {

const data::npz::File& fixture() {
  static const data::npz::File file(std::string(KILN_SOURCE_DIR) +
                                    "/tests/train/sliding_window/sliding_window.npz");
  return file;
}

// make_fixtures.py's predictor: y_c = (c + 1) x_0 + ramp + c mean(x_0 over the window),
// ramp = sum_d 0.1^(d+1) i_d over the window's own coordinates.
Tensor predictor(const Tensor& x) {
  const int64_t dims = x.dim() - 2;
  Tensor ramp = zeros({}, {.dtype = x.dtype()});
  for (int64_t d = 0; d < dims; ++d) {
    std::vector<int64_t> shape(static_cast<size_t>(dims), 1);
    shape[static_cast<size_t>(d)] = x.size(d + 2);
    ramp = add(ramp, mul(arange(x.size(d + 2), {.dtype = x.dtype()}).reshape(shape), std::pow(0.1, d + 1)));
  }
  const Tensor x0 = select(x, 1, 0);
  std::vector<int64_t> spatial_dims;
  std::vector<int64_t> mean_shape{x.size(0)};
  for (int64_t d = 1; d <= dims; ++d) {
    spatial_dims.push_back(d);
    mean_shape.push_back(1);
  }
  const Tensor window_mean = mean(x0, spatial_dims).reshape(mean_shape);
  return stack({add(x0, ramp), add(add(mul(x0, 2.0), ramp), window_mean)}, 1);
}

struct Case {
  std::string name;
  SlidingWindowOptions options;
};

TEST(SlidingWindow, EqualsMonaisInference) {
  const std::vector<Case> cases = {
      {"constant", {.roi_size = {8, 8, 8}, .sw_batch_size = 3, .overlap = 0.25}},
      {"gaussian", {.roi_size = {8, 6, 10}, .sw_batch_size = 4, .overlap = 0.5, .mode = BlendMode::Gaussian}},
      {"padded",
       {.roi_size = {8},
        .sw_batch_size = 5,
        .overlap = 0.6,
        .mode = BlendMode::Gaussian,
        .sigma_scale = 0.25,
        .cval = -1.5}},
      {"no_overlap_whole_dim", {.roi_size = {16, 5, 7}, .sw_batch_size = 2, .overlap = 0.0}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const Tensor input = fixture().load(c.name + "/input");
    const Tensor output = sliding_window_inference(input, predictor, c.options);
    // MONAI's Gaussian map is float32 whatever the input; Kiln's is float64
    const testing::Tolerance tol = c.options.mode == BlendMode::Gaussian ? testing::Tolerance{1e-6, 1e-6}
                                                                         : testing::Tolerance{1e-12, 1e-12};
    EXPECT_TRUE(testing::all_close(output, fixture().load(c.name + "/output"), tol));
  }
}

// The accumulation may live elsewhere than the windows: on the host here, as for a volume
// whose logits do not fit on the GPU; the result is the same.
TEST(SlidingWindow, AccumulatesOnTheRequestedDevice) {
  const Tensor input = fixture().load("constant/input");
  const SlidingWindowOptions o{.roi_size = {8}, .sw_batch_size = 7, .overlap = 0.25};
  SlidingWindowOptions host = o;
  host.sw_device = Device::cpu();
  host.device = Device::cpu();
  EXPECT_TRUE(testing::all_equal(sliding_window_inference(input, predictor, o),
                                 sliding_window_inference(input, predictor, host)));
  // a float32 input gives a float32 output, the float64 one to float32 rounding
  const Tensor single = sliding_window_inference(input.to(DType::Float32), predictor, o);
  EXPECT_EQ(single.dtype(), DType::Float32);
  EXPECT_TRUE(testing::all_close(single.to(DType::Float64), fixture().load("constant/output"), {1e-5, 1e-5}));
}

TEST(SlidingWindow, WindowStartsCoverTheImageAndEndAtItsEdge) {
  // MONAI's dense_patch_slices: interval int(8 x 0.75) = 6 -> 0, 6, 12 (moved back from
  // 12 to 12: 12 + 8 = 20 reaches the end)
  EXPECT_EQ(window_starts({20}, {8}, 0.25), (std::vector<std::vector<int64_t>>{{0, 6, 12}}));
  EXPECT_EQ(window_starts({17}, {8}, 0.25), (std::vector<std::vector<int64_t>>{{0, 6, 9}}));
  EXPECT_EQ(window_starts({16, 9}, {16, 3}, 0.9),
            (std::vector<std::vector<int64_t>>{{0}, {0, 1, 2, 3, 4, 5, 6}}));
  EXPECT_EQ(window_starts({8}, {8}, 0.5), (std::vector<std::vector<int64_t>>{{0}}));
}

TEST(SlidingWindow, ImportanceMapsAreMonais) {
  EXPECT_TRUE(testing::all_equal(importance_map({3, 4}, BlendMode::Constant, 0.125),
                                 ones({3, 4}, {.dtype = DType::Float64})));
  const Tensor g = importance_map({5}, BlendMode::Gaussian, 0.25);  // sigma 1.25, x = -2..2
  const double e1 = std::exp(-1.0 / (2 * 1.25 * 1.25)), e2 = std::exp(-4.0 / (2 * 1.25 * 1.25));
  EXPECT_TRUE(testing::all_close(g, tensor<double>({e2, e1, 1.0, e1, e2}), {1e-15, 1e-15}));
  // a narrow Gaussian is clamped below at 1e-3
  EXPECT_NEAR(min(importance_map({9, 9}, BlendMode::Gaussian, 0.05)).item<double>(), 1e-3, 1e-15);
}

// One window as large as the volume: the output is the predictor's, untouched.
TEST(SlidingWindow, AWholeVolumeWindowIsThePredictorItself) {
  const Tensor input = testing::random_for({2, 1, 6, 5, 7}, DType::Float64, 3);
  const Tensor out = sliding_window_inference(
      input, predictor, {.roi_size = {6, 5, 7}, .sw_batch_size = 2, .mode = BlendMode::Gaussian});
  EXPECT_TRUE(testing::all_close(out, predictor(input), {1e-14, 1e-14}));
}

TEST(SlidingWindow, BadArgumentsAreErrors) {
  const Tensor x = zeros({1, 1, 8, 8, 8});
  EXPECT_KILN_ERROR(sliding_window_inference(x, predictor, {.roi_size = {4, 4}}), "sliding_window_inference",
                    "2 sizes for 3 spatial dims");
  EXPECT_KILN_ERROR(sliding_window_inference(x, predictor, {.roi_size = {0}}), "sliding_window_inference",
                    "positive");
  EXPECT_KILN_ERROR(sliding_window_inference(x, predictor, {.roi_size = {4}, .overlap = 1.0}),
                    "sliding_window_inference", "overlap");
  EXPECT_KILN_ERROR(sliding_window_inference(x, predictor, {.roi_size = {4}, .sw_batch_size = 0}),
                    "sliding_window_inference", "sw_batch_size");
  EXPECT_KILN_ERROR(sliding_window_inference(zeros({8, 8}), predictor, {.roi_size = {4}}),
                    "sliding_window_inference", "[B, C, d...]");
  EXPECT_KILN_ERROR(
      sliding_window_inference(x, [](const Tensor& w) { return narrow(w, 2, 0, 2); }, {.roi_size = {4}}),
      "sliding_window_inference", "keep the window's size");
  EXPECT_KILN_ERROR(sliding_window_inference(x, [](const Tensor& w) { return sum(w); }, {.roi_size = {4}}),
                    "sliding_window_inference", "must return");
}

}  // namespace
}  // namespace kiln::train
