// Per-class segmentation metrics with MONAI's definitions (monai.metrics 1.6): Dice, IoU,
// the Hausdorff distance (optionally its percentile: HD95) and the average surface
// distance, in millimetres from the voxel spacing. Each takes a binarised prediction and
// ground truth, one-hot [B, C, d...] (non-zero = inside; argmax a network's output and
// one_hot it first), on any device (read on the host), and returns float64 [B, C'] (C' =
// C, or C - 1 without the background).
//
// MONAI's conventions for empty masks, kept exactly:
//   Dice, IoU   ground truth empty: NaN with ignore_empty (the default), else 1 when the
//               prediction is empty too and 0 when it is not.
//   distances   surfaces are the voxels of a mask with a face neighbour outside it (the
//               image's border counts as outside). Both empty: NaN. One empty: +inf for
//               the Hausdorff distance and the average surface distance, NaN for a
//               percentile (MONAI interpolates between infinities).
// Distances are exact Euclidean (distance_transform.h; MONAI queries a k-d tree), from each
// surface voxel of one mask to the nearest of the other's, directed from the prediction
// unless symmetric.
//
//   const Tensor dice = compute_dice(one_hot(argmax(logits, 1, true), C, DType::Float32), truth);
//   HausdorffDistanceOptions{.percentile = 95.0, .spacing = {2.5, 0.8, 0.8}}
#pragma once

#include <optional>
#include <vector>

#include "core/tensor.h"

namespace kiln::train {

struct OverlapMetricOptions {
  bool include_background = true;
  bool ignore_empty = true;
};
Tensor compute_dice(const Tensor& y_pred, const Tensor& y, const OverlapMetricOptions& options = {});
Tensor compute_iou(const Tensor& y_pred, const Tensor& y, const OverlapMetricOptions& options = {});

struct HausdorffDistanceOptions {
  bool include_background = false;
  std::optional<double> percentile{};  // in [0, 100]; none: the maximum
  bool directed = false;               // prediction to truth only
  std::vector<double> spacing{};       // per spatial dim, in mm; empty: 1
};
Tensor compute_hausdorff_distance(const Tensor& y_pred, const Tensor& y,
                                  const HausdorffDistanceOptions& options = {});

struct SurfaceDistanceOptions {
  bool include_background = false;
  bool symmetric = false;  // both directions' distances, averaged together
  std::vector<double> spacing{};
};
Tensor compute_average_surface_distance(const Tensor& y_pred, const Tensor& y,
                                        const SurfaceDistanceOptions& options = {});

}  // namespace kiln::train
