// A segmentation's label map read beside its image, for one's own scans: the label file
// must lie on the image's grid, so that voxel (i, j, k) of one is voxel (i, j, k) of the
// other. It is an error, naming both files, when their shapes differ or their affines
// (voxel to world, read as nifti.h reads them) differ by more than a thousandth of a voxel
// size; and an error naming the label file when it has several channels, when a voxel is
// not a whole non-negative number (a probability map or a resampled mask is not a label
// map), or, with `classes`, when a label is not below it.
//
//   const Tensor labels = read_label_map("case1_seg.nii.gz", "case1.nii.gz", /*classes=*/3);
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace kiln::data {

struct LabelMapOptions {
  int64_t classes = 0;           // labels must be < classes; 0: any non-negative label
  bool reorient_to_ras = false;  // as the image is read (both reoriented alike)
};

// int64 [1, X, Y, Z] on the image's grid.
Tensor read_label_map(const std::string& label_path, const std::string& image_path,
                      const LabelMapOptions& options = {});

// The distinct labels of a label map, ascending (what `kiln train` reports as the classes
// found).
std::vector<int64_t> labels_in(const Tensor& label_map);

}  // namespace kiln::data
