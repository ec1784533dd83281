// A MedMNIST 3D dataset written out as one's own scans would be: a NIfTI file per sample
// (uint8, as stored, on an identity affine: 1 mm voxels, the array's axes as i, j, k) and
// a manifest, so the trainer's own-scans route can be tried, and checked, on data whose
// answers are known (`kiln data export adrenalmnist3d --out scans/`).
//
//   OUT/manifest.csv          image,label,split   (the label is the class index)
//   OUT/train/000000.nii.gz   train sample 0, ...; OUT/val/..., OUT/test/...
//
// Samples are written in MedMNIST's order, train then val then test, so the manifest's
// rows of a split are that split's samples in order.
#pragma once

#include <cstdint>
#include <string>

#include "data/medmnist.h"

namespace kiln::data {

struct ExportResult {
  std::string manifest;  // OUT/manifest.csv
  int64_t files = 0;
};

// Writes every split of `flag`; each file (and the manifest last) atomically. A folder that
// already holds a manifest.csv is refused unless `overwrite`. An error names the file it
// could not write.
ExportResult export_medmnist(std::string_view flag, const MedMnistOptions& options, const std::string& out,
                             bool overwrite = false);

}  // namespace kiln::data
