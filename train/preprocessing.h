// The preprocessing of one's own scans, from the configuration, recorded in the run (its
// settings are config.json's and the weights' configuration) so that `kiln eval` and
// `kiln predict` apply exactly what training applied:
//
//   load         the file(s), --orientation RAS (nibabel's closest canonical), --spacing MM
//                or MM,MM,MM (resampled from the NIfTI header's voxel size, data/scan_dataset.h)
//   --normalize  zscore (each scan's own mean and std), minmax (to [0, 1]), window:LO,HI
//                (clipped to a CT window, to [0, 1]), scale:F (times F: a fixed range such
//                as uint8's), none; auto = zscore
//   --crop-pad   D,H,W: padded (zeros, evenly) and centre-cropped to exactly that size
//   --resize     D,H,W: trilinear resampling to that size
//   augment      training only, with --augment: random flips of each axis
//
// in that order: intensities are normalised over the scan as it was acquired, before
// padding adds zeros or resizing blends voxels.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>

#include "data/scan_dataset.h"
#include "data/transforms.h"

namespace kiln::train {

struct TrainConfig;  // train/config.h, which holds a parsed Preprocessing in its Choices

struct Normalization {
  enum class Mode { None, ZScore, MinMax, Window, Scale };
  Mode mode = Mode::ZScore;
  double a = 0, b = 0;  // window: low, high; scale: the factor
};

struct Preprocessing {
  data::ScanLoading loading;
  Normalization normalization;
  std::optional<std::array<int64_t, 3>> crop_pad, resize;
  // Whether any setting differs from a run's defaults (MedMNIST and synthetic data have
  // their own preprocessing and refuse these).
  bool any_set = false;
};

// The settings parsed (validate() does, into Choices::preprocessing); an error names the
// flag and what it takes.
Preprocessing parse_preprocessing(const TrainConfig& config);

// The transforms after loading: normalisation, crop-pad, resize, and for training with
// `augment` random flips.
data::TransformPtr preprocessing_transform(const Preprocessing& preprocessing, bool train, bool augment);

}  // namespace kiln::train
