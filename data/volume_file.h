// One volume file into a [C, X, Y, Z] tensor, chosen by its extension: .nii and .nii.gz
// through the NIfTI reader (float32, scaled; optionally reoriented to RAS+), .npy through
// the NPY reader and .npz holding one array through the NPZ reader (a 3-D array gains a
// channel dim; a 4-D one is taken as [C, X, Y, Z]). What the folder, CSV and scan datasets
// read their images with; read_volume_info says what a file holds from its header alone.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace kiln::data {

struct VolumeFileOptions {
  bool reorient_to_ras = false;  // NIfTI only (an .npy has no geometry)
};

// The extensions load_volume reads, longest first (".nii.gz" before ".nii").
const std::vector<std::string>& volume_extensions();
// Whether `path` ends with one of them.
bool is_volume_file(const std::string& path);

// The volume in `path`; an error naming the file for another extension or rank.
Tensor load_volume(const std::string& path, const VolumeFileOptions& options = {});

struct LoadedVolume {
  Tensor data;                                      // [C, X, Y, Z]
  std::optional<std::array<double, 3>> spacing;     // NIfTI: the voxel size (mm) along X, Y, Z
};
// The volume and, for NIfTI, its spacing (following the reorientation).
LoadedVolume load_volume_with_spacing(const std::string& path, const VolumeFileOptions& options = {});

struct VolumeInfo {
  std::array<int64_t, 4> shape{};                // [C, X, Y, Z] as load_volume gives it
  std::optional<std::array<double, 3>> spacing;  // NIfTI only
};
// What load_volume would give, from the header alone (no voxel is read): an error naming
// the file when it is missing, unreadable, corrupt or of another rank.
VolumeInfo read_volume_info(const std::string& path, const VolumeFileOptions& options = {});

}  // namespace kiln::data
