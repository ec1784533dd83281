// ScanDataset: one's own scans as a Dataset. Each sample is read from its file(s) as
// ScanLoading says (data/volume_file.h: NIfTI, NPY or NPZ; reoriented to RAS+; resampled
// to a voxel spacing), the channels of several files concatenated in order, with its
// target; decoded volumes are kept in a VolumeCache up to a byte budget, so compressed
// scans are decoded once, not once per epoch.
//
//   data::ScanDataset scans({{.images = {"t1.nii.gz", "flair.nii.gz"}, .label = full({}, 1, ...)}},
//                           {.loading = {.reorient_to_ras = true, .spacing = {{1, 1, 1}}}});
//   scans.get(0).at(data::kImage);  // [2, X, Y, Z]: float32 from NIfTI
//
// Note [Resampling to a spacing]: a volume of n voxels of size s along an axis becomes
// round(n s / t) voxels of size t (fewer than 1, or a million or more, is an error), by
// trilinear resampling over the same extent (data/resample.h: resize, PyTorch's
// F.interpolate with align_corners=False), so the scan's field of view is kept; its
// spacing comes from the NIfTI header (pixdim, after the reorientation). A file without
// geometry (.npy, .npz) cannot be resampled: an error.
//
// Note [Finite voxels]: a volume with a NaN or an infinite voxel is an error naming the
// file and the count. One such voxel makes a scan's z-score, or any normalisation over
// it, NaN everywhere, and the model then learns from, or predicts on, a blank; a masked
// region exported as NaN is common in derived maps, and the fix is the user's to choose.
// (NIfTI files reach this check with their non-finite floats already 0, as the reference
// library reads them, and a warning once per file: Note [Non-finite NIfTI voxels] in
// data/nifti.h.)
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "data/volume_cache.h"

namespace kiln::data {

struct ScanLoading {
  bool reorient_to_ras = false;
  std::optional<std::array<double, 3>> spacing = std::nullopt;  // mm along X, Y, Z (Note [Resampling to a spacing])
};

// The [C, X, Y, Z] volume of one scan: each file loaded as `loading` says (NIfTI as
// float32, NPY and NPZ as stored, a resampled one as float32), the files' channels
// concatenated (their spatial shapes must agree: an error naming both).
Tensor load_scan(const std::vector<std::string>& files, const ScanLoading& loading);
// The same through `cache` (keyed by the files).
Tensor load_scan(const std::vector<std::string>& files, const ScanLoading& loading, VolumeCache& cache);
// Note [Resampling to a spacing]: the size a volume of `size` voxels at `spacing` gets.
std::array<int64_t, 3> spacing_size(const std::array<int64_t, 3>& size, const std::array<double, 3>& spacing,
                                    const std::array<double, 3>& target);

struct ScanSample {
  std::vector<std::string> images;  // one file per channel
  Tensor label;                     // the sample's target, as the dataset returns it
};

struct ScanDatasetOptions {
  ScanLoading loading = {};
  int64_t cache_bytes = 0;
  std::string name = "scans";  // what messages call the dataset
};

class ScanDataset final : public Dataset {
 public:
  ScanDataset(std::vector<ScanSample> samples, ScanDatasetOptions options);
  int64_t size() const override { return static_cast<int64_t>(samples_.size()); }
  // {"image": float32 [C, X, Y, Z], "label": the target}, metadata "path" (the first file).
  Sample get(int64_t index) const override;
  std::string name() const override { return options_.name; }
  const std::vector<ScanSample>& samples() const { return samples_; }
  const VolumeCache& cache() const { return *cache_; }

 private:
  std::vector<ScanSample> samples_;
  ScanDatasetOptions options_;
  std::unique_ptr<VolumeCache> cache_;
};

}  // namespace kiln::data
