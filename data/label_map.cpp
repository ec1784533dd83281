// read_label_map (label_map.h): both headers read and compared first (no voxel read when
// the grids differ), then the label file's voxels read as float64 and checked whole.
#include "data/label_map.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "core/error.h"
#include "data/nifti.h"

namespace kiln::data {
namespace {

// The largest difference between two affines, relative to the image's voxel size.
double affine_difference(const nifti::Header& a, const nifti::Header& b) {
  double worst = 0;
  for (size_t r = 0; r < 3; ++r) {
    for (size_t c = 0; c < 4; ++c) worst = std::max(worst, std::abs(a.affine[r][c] - b.affine[r][c]));
  }
  const double voxel = std::min({a.spacing[0], a.spacing[1], a.spacing[2]});
  return voxel > 0 ? worst / voxel : worst;
}

}  // namespace

Tensor read_label_map(const std::string& label_path, const std::string& image_path,
                      const LabelMapOptions& options) {
  KILN_CHECK(options.classes >= 0, "read_label_map: classes must be >= 0, got ", options.classes);
  const nifti::Header image = nifti::read_header(image_path);
  const nifti::Header label = nifti::read_header(label_path);
  const std::vector<int64_t> image_grid(image.dims.begin(), image.dims.begin() + 3);
  const std::vector<int64_t> label_grid(label.dims.begin(), label.dims.begin() + 3);
  KILN_CHECK(image_grid == label_grid, "label map ", label_path, " has the grid ", label_grid,
             " but its image ", image_path, " has ", image_grid,
             ": a label map must lie on its image's grid (resample it there)");
  KILN_CHECK(label.dims.size() == 3 || label.dims[3] == 1, "label map ", label_path, " has ", label.dims[3],
             " channels; a label map has one (class numbers, not one-hot)");
  const double off = affine_difference(image, label);
  KILN_CHECK(off <= 1e-3, "label map ", label_path, " and its image ", image_path,
             " have different affines (", label.orientation, " vs ", image.orientation, ", up to ", off,
             " voxels apart): the same voxel would be two places in the body");
  const nifti::Volume volume = nifti::read(label_path, {.reorient_to_ras = options.reorient_to_ras});
  KILN_CHECK(volume.non_finite_zeroed == 0, "label map ", label_path, " holds ", volume.non_finite_zeroed,
             " NaN or infinite voxels, which are not class numbers");
  const std::vector<double> values = volume.data.to(DType::Float64).contiguous().to_vector<double>();
  for (size_t i = 0; i < values.size(); ++i) {
    const double v = values[i];
    KILN_CHECK(std::isfinite(v) && v >= 0 && v == std::floor(v), "label map ", label_path, ": voxel ", i,
               " holds ", v, ", not a class number (a whole number >= 0)");
    KILN_CHECK(options.classes == 0 || v < static_cast<double>(options.classes), "label map ", label_path,
               ": label ", static_cast<int64_t>(v), " is outside the ", options.classes, " classes [0, ",
               options.classes, ")");
  }
  return volume.data.to(DType::Int64);
}

std::vector<int64_t> labels_in(const Tensor& label_map) {
  const std::vector<int64_t> values = label_map.to(DType::Int64).contiguous().to_vector<int64_t>();
  const std::set<int64_t> distinct(values.begin(), values.end());
  return {distinct.begin(), distinct.end()};
}

}  // namespace kiln::data
