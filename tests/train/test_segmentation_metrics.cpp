// Segmentation metrics (train/segmentation_metrics.h) equal MONAI's compute_dice,
// compute_iou, compute_hausdorff_distance and compute_average_surface_distance on blobs in
// 2-D and 3-D with anisotropic spacing and empty classes (tests/train/
// segmentation_metrics/make_fixtures.py, monai 1.6.1); the exact distance transform
// (train/distance_transform.h) equals a brute-force search; bad arguments are errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "core/ops.h"
#include "data/npz.h"
#include "tests/test_util.h"
#include "train/distance_transform.h"
#include "train/segmentation_metrics.h"

namespace kiln::train {
namespace {

const data::npz::File& fixture() {
  static const data::npz::File file(std::string(KILN_SOURCE_DIR) +
                                    "/tests/train/segmentation_metrics/segmentation_metrics.npz");
  return file;
}

using Metric =
    std::function<Tensor(const Tensor& pred, const Tensor& truth, const std::vector<double>& spacing)>;

// make_fixtures.py's metrics, with the same arguments.
const std::map<std::string, Metric>& metrics() {
  static const std::map<std::string, Metric> all = {
      {"dice", [](const Tensor& p, const Tensor& t, const auto&) { return compute_dice(p, t); }},
      {"dice_all", [](const Tensor& p, const Tensor& t,
                      const auto&) { return compute_dice(p, t, {.ignore_empty = false}); }},
      {"iou", [](const Tensor& p, const Tensor& t,
                 const auto&) { return compute_iou(p, t, {.include_background = false}); }},
      {"iou_all", [](const Tensor& p, const Tensor& t,
                     const auto&) { return compute_iou(p, t, {.ignore_empty = false}); }},
      {"hd", [](const Tensor& p, const Tensor& t,
                const auto& s) { return compute_hausdorff_distance(p, t, {.spacing = s}); }},
      {"hd95",
       [](const Tensor& p, const Tensor& t, const auto& s) {
         return compute_hausdorff_distance(p, t, {.percentile = 95.0, .spacing = s});
       }},
      {"hd95_directed",
       [](const Tensor& p, const Tensor& t, const auto&) {
         return compute_hausdorff_distance(
             p, t, {.include_background = true, .percentile = 95.0, .directed = true});
       }},
      {"asd", [](const Tensor& p, const Tensor& t,
                 const auto& s) { return compute_average_surface_distance(p, t, {.spacing = s}); }},
      {"asd_symmetric",
       [](const Tensor& p, const Tensor& t, const auto& s) {
         return compute_average_surface_distance(
             p, t, {.include_background = true, .symmetric = true, .spacing = s});
       }},
  };
  return all;
}

// NaN and infinities where MONAI has them; finite values to float32's rounding (MONAI's
// distances are float32).
void expect_same_metric(const Tensor& actual, const Tensor& expected) {
  ASSERT_EQ(actual.sizes(), expected.sizes());
  const std::vector<double> a = actual.to_vector<double>(), e = expected.to_vector<double>();
  for (size_t i = 0; i < a.size(); ++i) {
    SCOPED_TRACE(i);
    if (std::isnan(e[i])) {
      EXPECT_TRUE(std::isnan(a[i])) << a[i];
    } else if (std::isinf(e[i])) {
      EXPECT_EQ(a[i], e[i]);
    } else {
      EXPECT_NEAR(a[i], e[i], 1e-5 * std::max(1.0, std::abs(e[i])));
    }
  }
}

TEST(SegmentationMetrics, EqualMonaisOnBlobsWithEmptyClasses) {
  size_t compared = 0;
  for (const std::string name : {"volumes", "empty_classes", "slices"}) {
    const Tensor pred = fixture().load(name + "_pred"), truth = fixture().load(name + "_truth");
    const std::vector<double> spacing = fixture().load(name + "_spacing").to_vector<double>();
    for (const auto& [metric, fn] : metrics()) {
      SCOPED_TRACE(name + " " + metric);
      expect_same_metric(fn(pred, truth, spacing), fixture().load(name + "_" + metric));
      ++compared;
    }
  }
  EXPECT_EQ(compared, 27u);
  // the fixture has the empty cases it claims: NaN and inf values to compare
  const std::vector<double> hd = fixture().load("empty_classes_hd").to_vector<double>();
  EXPECT_TRUE(std::any_of(hd.begin(), hd.end(), [](double v) { return std::isinf(v); }));
  EXPECT_TRUE(std::any_of(hd.begin(), hd.end(), [](double v) { return std::isnan(v); }));
}

TEST(SegmentationMetrics, ReadAnyDtypeAndLayout) {
  const Tensor pred = fixture().load("volumes_pred"), truth = fixture().load("volumes_truth");
  const Tensor expected = compute_dice(pred, truth);
  EXPECT_TRUE(testing::all_equal(compute_dice(pred.to(DType::UInt8), truth.to(DType::Int64)), expected));
  EXPECT_TRUE(testing::all_equal(compute_dice(pred.contiguous(MemoryFormat::ChannelsLast3d),
                                              truth.contiguous(MemoryFormat::ChannelsLast3d)),
                                 expected));
  EXPECT_EQ(expected.dtype(), DType::Float64);
  EXPECT_EQ(expected.sizes(), (Dims{2, 3}));
}

// A cube against itself shifted by one voxel along an axis of spacing s: every surface
// distance is 0 or s, so the Hausdorff distance is s exactly.
TEST(SegmentationMetrics, ShiftedCubeHasTheShiftAsHausdorffDistance) {
  Tensor a = zeros({1, 1, 8, 8, 8}), b = zeros({1, 1, 8, 8, 8});
  narrow(narrow(narrow(a, 2, 2, 4), 3, 2, 4), 4, 2, 4).fill_(1.0);
  narrow(narrow(narrow(b, 2, 3, 4), 3, 2, 4), 4, 2, 4).fill_(1.0);
  const Tensor hd =
      compute_hausdorff_distance(a, b, {.include_background = true, .spacing = {2.5, 1.0, 1.0}});
  EXPECT_DOUBLE_EQ(hd.item<double>(), 2.5);
  EXPECT_DOUBLE_EQ(compute_hausdorff_distance(a, a, {.include_background = true}).item<double>(), 0.0);
  EXPECT_DOUBLE_EQ(compute_dice(a, b).item<double>(), 2.0 * 48 / 128);
}

TEST(SegmentationMetrics, BadArgumentsAreErrors) {
  const Tensor m = zeros({1, 2, 4, 4});
  EXPECT_KILN_ERROR(compute_dice(m, zeros({1, 2, 4, 5})), "compute_dice", "same shape");
  EXPECT_KILN_ERROR(compute_iou(zeros({2, 2}), zeros({2, 2})), "compute_iou", "one-hot [B, C, d...]");
  EXPECT_KILN_ERROR(compute_hausdorff_distance(m, m, {.percentile = 101.0}), "compute_hausdorff_distance",
                    "percentile");
  EXPECT_KILN_ERROR(compute_hausdorff_distance(m, m, {.spacing = {1.0}}), "compute_hausdorff_distance",
                    "1 spacings for 2 spatial dims");
  EXPECT_KILN_ERROR(compute_average_surface_distance(m, m, {.spacing = {1.0, 0.0}}),
                    "compute_average_surface_distance", "positive");
  EXPECT_KILN_ERROR(squared_distance_transform({1, 0}, {3}, {1.0}), "squared_distance_transform",
                    "2 sites for 3");
  EXPECT_KILN_ERROR(squared_distance_transform({1}, {1}, {-1.0}), "squared_distance_transform", "positive");
}

// The transform against the definition: the minimum over every site of the weighted
// squared offset, on random grids of 1 to 3 axes with sparse and dense sites.
TEST(DistanceTransform, EqualsTheBruteForceMinimum) {
  std::mt19937 rng(7);
  for (const std::vector<int64_t>& sizes :
       std::vector<std::vector<int64_t>>{{17}, {9, 13}, {6, 7, 5}, {1, 4, 1}}) {
    for (double density : {0.02, 0.3}) {
      SCOPED_TRACE(::testing::PrintToString(sizes) + " density " + std::to_string(density));
      std::vector<double> spacing;
      for (size_t d = 0; d < sizes.size(); ++d) spacing.push_back(0.5 + 0.7 * static_cast<double>(d));
      int64_t n = 1;
      for (int64_t s : sizes) n *= s;
      std::vector<uint8_t> sites(static_cast<size_t>(n));
      std::bernoulli_distribution site(density);
      for (auto& s : sites) s = site(rng) ? 1 : 0;
      const std::vector<double> d2 = squared_distance_transform(sites, sizes, spacing);
      const auto coords = [&](int64_t i) {
        std::vector<int64_t> c(sizes.size());
        for (size_t d = sizes.size(); d-- > 0;) {
          c[d] = i % sizes[d];
          i /= sizes[d];
        }
        return c;
      };
      for (int64_t i = 0; i < n; ++i) {
        double best = std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < n; ++j) {
          if (!sites[static_cast<size_t>(j)]) continue;
          double sq = 0;
          const auto ci = coords(i), cj = coords(j);
          for (size_t d = 0; d < sizes.size(); ++d) {
            const double delta = static_cast<double>(ci[d] - cj[d]) * spacing[d];
            sq += delta * delta;
          }
          best = std::min(best, sq);
        }
        if (std::isinf(best)) {
          EXPECT_TRUE(std::isinf(d2[static_cast<size_t>(i)])) << "voxel " << i;
        } else {
          EXPECT_NEAR(d2[static_cast<size_t>(i)], best, 1e-9 * std::max(1.0, best)) << "voxel " << i;
        }
      }
    }
  }
  // no site at all: every voxel is infinitely far
  for (double v : squared_distance_transform({0, 0, 0, 0}, {2, 2}, {1.0, 1.0})) EXPECT_TRUE(std::isinf(v));
}

}  // namespace
}  // namespace kiln::train
