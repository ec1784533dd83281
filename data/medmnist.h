// MedMNIST 3D by name, as MedMNIST's own Python package (v3, info.py) describes and finds
// them: organmnist3d, nodulemnist3d, adrenalmnist3d, fracturemnist3d, vesselmnist3d and
// synapsemnist3d, at 28^3 or 64^3, split train / val / test.
//
// Note [MedMNIST files]: a dataset's file is <root>/<flag>.npz (28^3) or
// <root>/<flag>_64.npz, root being MedMnistOptions::root, else $MEDMNIST_ROOT, else
// ~/.medmnist (MedMNIST's default). The file is checked against the official MD5 (the
// whole .npz: 0.3 to 40 MB, a fraction of a second), then must hold
// <split>_images uint8 [N, s, s, s] and <split>_labels uint8 [N, 1] with N the split's
// official sample count. A missing file is an error saying where it was looked for and
// the command that fetches it (`kiln data download <flag> [--size 64]`); with
// MedMnistOptions::download the constructor fetches it itself (data/download.h: resumable,
// MD5-checked, renamed into place), as MedMNIST's download=True.
//
// Samples: "image", the volume as stored, uint8 [1, s, s, s] (a channel dim first, as a
// 3D conv takes it; a view into the split's array, no copy), and "label", the class
// index, an int64 scalar. Transforms (ToFloat, MedMNIST's shape transform) do the rest.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "data/dataset.h"
#include "data/download.h"

namespace kiln::data {

struct MedMnistInfo {
  std::string_view flag;                 // "adrenalmnist3d"
  std::string_view python_class;         // "AdrenalMNIST3D"
  std::string_view task;                 // "binary-class" or "multi-class"
  std::vector<std::string_view> labels;  // class names by index
  int64_t train = 0, val = 0, test = 0;  // sample counts
  std::string_view md5_28, md5_64;
};

// The six 3D datasets, in MedMNIST's order.
const std::vector<MedMnistInfo>& medmnist_3d_datasets();
// The one called `flag`; an error listing the flags otherwise.
const MedMnistInfo& medmnist_info(std::string_view flag);

enum class Split { Train, Val, Test };
Split split_from_name(std::string_view name);  // "train", "val" or "test"
std::string_view split_name(Split split);

struct MedMnistOptions {
  std::string root = "";  // empty: $MEDMNIST_ROOT, else ~/.medmnist
  int64_t size = 28;      // 28 or 64
  bool check_md5 = true;
  bool download = false;  // fetch the file from Zenodo when it is missing or wrong
};

// Where the file of `flag` at `size` is looked for (Note [MedMNIST files]).
std::string medmnist_path(std::string_view flag, const MedMnistOptions& options = {});
// The official download URL (Zenodo record 10519652).
std::string medmnist_url(std::string_view flag, int64_t size);
// What a download of that file checks (data/download.h): its official MD5, and the most
// bytes it can hold, so a server that streams without end is stopped (Note [Download
// limits]): every sample's volume and label stored uncompressed, with room for the
// archive's headers.
DownloadOptions medmnist_download_options(std::string_view flag, int64_t size);

class MedMnist3d final : public Dataset {
 public:
  MedMnist3d(std::string_view flag, Split split, const MedMnistOptions& options = {});
  int64_t size() const override { return images_.size(0); }
  Sample get(int64_t index) const override;
  std::string name() const override;
  const MedMnistInfo& info() const { return *info_; }
  // The whole split: images uint8 [N, s, s, s] and labels int64 [N].
  const Tensor& images() const { return images_; }
  const Tensor& labels() const { return labels_; }

 private:
  const MedMnistInfo* info_;
  Split split_;
  int64_t side_;
  Tensor images_, labels_;
};

}  // namespace kiln::data
