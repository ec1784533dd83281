// load_volume (volume_file.h): the extension picks the reader.
#include "data/volume_file.h"

#include "core/error.h"
#include "data/nifti.h"
#include "data/npy.h"

namespace kiln::data {

const std::vector<std::string>& volume_extensions() {
  static const std::vector<std::string> extensions = {".nii.gz", ".nii", ".npy"};
  return extensions;
}

bool is_volume_file(const std::string& path) {
  for (const std::string& extension : volume_extensions()) {
    if (path.ends_with(extension)) return true;
  }
  return false;
}

Tensor load_volume(const std::string& path, const VolumeFileOptions& options) {
  if (path.ends_with(".nii") || path.ends_with(".nii.gz")) {
    return nifti::read(path, {.reorient_to_ras = options.reorient_to_ras}).data;
  }
  KILN_CHECK(path.ends_with(".npy"), "volume file '", path, "': not a .nii, .nii.gz or .npy file");
  Tensor array = npy::load(path);
  KILN_CHECK(array.dim() == 3 || array.dim() == 4, "volume file '", path,
             "': a 3-D [X, Y, Z] or 4-D [C, X, Y, Z] array is needed, got shape ", array.sizes());
  return array.dim() == 3 ? array.unsqueeze(0) : array;
}

}  // namespace kiln::data
