// load_volume and read_volume_info (volume_file.h): the extension picks the reader.
#include "data/volume_file.h"

#include "core/error.h"
#include "core/regular_file.h"
#include "core/warning.h"
#include "data/nifti.h"
#include "data/npy.h"
#include "data/npz.h"

namespace kiln::data {
namespace {

bool is_nifti(const std::string& path) { return path.ends_with(".nii") || path.ends_with(".nii.gz"); }

// A 3-D array as [1, X, Y, Z]; a 4-D one as it is; any other rank an error.
std::array<int64_t, 4> volume_shape(const std::vector<int64_t>& shape, const std::string& path) {
  KILN_CHECK(shape.size() == 3 || shape.size() == 4, "volume file '", path,
             "': a 3-D [X, Y, Z] or 4-D [C, X, Y, Z] array is needed, got shape ", shape);
  if (shape.size() == 3) return {1, shape[0], shape[1], shape[2]};
  return {shape[0], shape[1], shape[2], shape[3]};
}

// The one array of an .npz (an archive of several is ambiguous).
std::string only_array(const npz::File& file, const std::string& path) {
  const std::vector<npz::Array> arrays = file.arrays();
  KILN_CHECK(arrays.size() == 1, "volume file '", path, "': an .npz volume holds one array, this one holds ",
             arrays.size());
  return arrays[0].key;
}

}  // namespace

const std::vector<std::string>& volume_extensions() {
  static const std::vector<std::string> extensions = {".nii.gz", ".nii", ".npy", ".npz"};
  return extensions;
}

bool is_volume_file(const std::string& path) {
  for (const std::string& extension : volume_extensions()) {
    if (path.ends_with(extension)) return true;
  }
  return false;
}

LoadedVolume load_volume_with_spacing(const std::string& path, const VolumeFileOptions& options) {
  check_regular_file(path, "volume file");
  if (is_nifti(path)) {
    nifti::Volume volume = nifti::read(path, {.reorient_to_ras = options.reorient_to_ras});
    if (volume.non_finite_zeroed > 0) {  // Note [Non-finite NIfTI voxels]
      warn_once(path, path + ": " + std::to_string(volume.non_finite_zeroed) + " of its " +
                          std::to_string(volume.data.numel()) +
                          " voxels are NaN or infinite and were read as 0, as NIfTI readers do");
    }
    return {.data = std::move(volume.data), .spacing = volume.header.spacing};
  }
  KILN_CHECK(path.ends_with(".npy") || path.ends_with(".npz"), "volume file '", path,
             "': not a .nii, .nii.gz, .npy or .npz file");
  Tensor array;
  if (path.ends_with(".npy")) {
    array = npy::load(path);
  } else {
    const npz::File file(path);
    array = file.load(only_array(file, path));
  }
  const std::array<int64_t, 4> shape = volume_shape(array.sizes(), path);
  return {.data = array.reshape({shape[0], shape[1], shape[2], shape[3]}), .spacing = std::nullopt};
}

Tensor load_volume(const std::string& path, const VolumeFileOptions& options) {
  return load_volume_with_spacing(path, options).data;
}

VolumeInfo read_volume_info(const std::string& path, const VolumeFileOptions& options) {
  check_regular_file(path, "volume file");
  if (is_nifti(path)) {
    const nifti::Header header = nifti::read_header(path);
    std::array<int64_t, 4> shape{header.dims.size() > 3 ? header.dims[3] : 1, header.dims[0], header.dims[1],
                                 header.dims[2]};
    std::array<double, 3> spacing = header.spacing;
    if (options.reorient_to_ras) {  // axis w of the result is the file's axis running along world axis w
      nifti::Orientation o{};
      try {
        o = nifti::orientation_of(header.affine);
      } catch (const Error& e) {
        throw Error("nifti: " + path + " cannot be reoriented to RAS: " + e.what());
      }
      for (size_t i = 0; i < 3; ++i) {
        shape[static_cast<size_t>(o.axis[i]) + 1] = header.dims[i];
        spacing[static_cast<size_t>(o.axis[i])] = header.spacing[i];
      }
    }
    return {.shape = shape, .spacing = spacing};
  }
  KILN_CHECK(path.ends_with(".npy") || path.ends_with(".npz"), "volume file '", path,
             "': not a .nii, .nii.gz, .npy or .npz file");
  if (path.ends_with(".npy")) return {.shape = volume_shape(npy::read_header(path).shape, path), .spacing = std::nullopt};
  const npz::File file(path);
  const std::string key = only_array(file, path);
  for (const npz::Array& array : file.arrays()) {
    if (array.key == key) return {.shape = volume_shape(array.header.shape, path), .spacing = std::nullopt};
  }
  return {};
}

}  // namespace kiln::data
