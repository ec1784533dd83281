// One volume file into a [C, X, Y, Z] tensor, chosen by its extension: .nii and .nii.gz
// through the NIfTI reader (float32, scaled; optionally reoriented to RAS+), .npy through
// the NPY reader (a 3-D array gains a channel dim; a 4-D one is taken as [C, X, Y, Z]).
// What the folder and CSV datasets read their images with.
#pragma once

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

}  // namespace kiln::data
