// MedMNIST 3D (data/medmnist.h): the six datasets' facts as MedMNIST v3's info.py lists
// them, the file lookup and checks of Note [MedMNIST files], and the split's arrays
// loaded once from the .npz (data/npz.h).
#include "data/medmnist.h"

#include <cstdlib>
#include <filesystem>

#include "core/error.h"
#include "core/ops.h"
#include "data/download.h"
#include "data/md5.h"
#include "data/npz.h"

namespace kiln::data {

const std::vector<MedMnistInfo>& medmnist_3d_datasets() {
  static const std::vector<MedMnistInfo> datasets = {
      {"organmnist3d",
       "OrganMNIST3D",
       "multi-class",
       {"liver", "kidney-right", "kidney-left", "femur-right", "femur-left", "bladder", "heart", "lung-right",
        "lung-left", "spleen", "pancreas"},
       971,
       161,
       610,
       "a0c5a1ff56af4f155c46d46fbb45a2fe",
       "58a2205adf14a9d0a189cb06dc78bf10"},
      {"nodulemnist3d",
       "NoduleMNIST3D",
       "binary-class",
       {"benign", "malignant"},
       1158,
       165,
       310,
       "8755a7e9e05a4d9ce80a24c3e7a256f3",
       "c47c5b7d457bf6332200d2ea6d64ecd8"},
      {"adrenalmnist3d",
       "AdrenalMNIST3D",
       "binary-class",
       {"normal", "hyperplasia"},
       1188,
       98,
       298,
       "bbd3c5a5576322bc4cdfea780653b1ce",
       "17721accfe9fb005146a47d33bc54b2f"},
      {"fracturemnist3d",
       "FractureMNIST3D",
       "multi-class",
       {"buckle rib fracture", "nondisplaced rib fracture", "displaced rib fracture"},
       1027,
       103,
       240,
       "6aa7b0143a6b42da40027a9dda61302f",
       "f01d7e6316aedf4210da0da5b7437b42"},
      {"vesselmnist3d",
       "VesselMNIST3D",
       "binary-class",
       {"vessel", "aneurysm"},
       1335,
       191,
       382,
       "b41fd4f7e7e2feedddb201585ecafa1b",
       "6bb274a8846e1097066dcd64e2c4520f"},
      {"synapsemnist3d",
       "SynapseMNIST3D",
       "binary-class",
       {"inhibitory synapse", "excitatory synapse"},
       1230,
       177,
       352,
       "1235b78a3cd6280881dd7850a78eadb6",
       "43bd14ebf3af9d3dd072446fedc14d5e"},
  };
  return datasets;
}

const MedMnistInfo& medmnist_info(std::string_view flag) {
  std::string flags;
  for (const MedMnistInfo& info : medmnist_3d_datasets()) {
    if (info.flag == flag) return info;
    flags += (flags.empty() ? "" : ", ") + std::string(info.flag);
  }
  KILN_CHECK(false, "medmnist: no 3D dataset '", flag, "' (there are: ", flags, ")");
}

Split split_from_name(std::string_view name) {
  if (name == "train") return Split::Train;
  if (name == "val") return Split::Val;
  if (name == "test") return Split::Test;
  KILN_CHECK(false, "medmnist: no split '", name, "' (there are: train, val, test)");
}

std::string_view split_name(Split split) {
  return split == Split::Train ? "train" : split == Split::Val ? "val" : "test";
}

namespace {

void check_size(int64_t size) {
  KILN_CHECK(size == 28 || size == 64, "medmnist: the 3D datasets come at size 28 or 64, not ", size);
}

// "<flag>" at 28^3, "<flag>_<size>" otherwise (MedMNIST's names).
std::string sized_name(std::string_view flag, int64_t size) {
  std::string name(flag);
  if (size != 28) name.append("_").append(std::to_string(size));
  return name;
}

std::string file_name(std::string_view flag, int64_t size) { return sized_name(flag, size) + ".npz"; }

}  // namespace

std::string medmnist_path(std::string_view flag, const MedMnistOptions& options) {
  check_size(options.size);
  std::filesystem::path root = options.root;
  if (root.empty()) {
    const char* env = std::getenv("MEDMNIST_ROOT");
    const char* home = std::getenv("HOME");
    root = env != nullptr && *env != '\0' ? std::filesystem::path(env)
                                          : std::filesystem::path(home != nullptr ? home : "") / ".medmnist";
  }
  return (root / file_name(flag, options.size)).string();
}

std::string medmnist_url(std::string_view flag, int64_t size) {
  check_size(size);
  return "https://zenodo.org/records/10519652/files/" + file_name(flag, size) + "?download=1";
}

DownloadOptions medmnist_download_options(std::string_view flag, int64_t size) {
  check_size(size);
  const MedMnistInfo& info = medmnist_info(flag);
  const int64_t samples = info.train + info.val + info.test;
  // uint8 volumes and labels (at most 8 bytes a sample), plus 1 MiB for the zip's and the
  // arrays' headers and deflate's worst-case growth (5 bytes per 64 KiB block).
  const int64_t stored = samples * (size * size * size + 8);
  return {.expected_md5 = std::string(size == 28 ? info.md5_28 : info.md5_64),
          .max_bytes = stored + stored / 8192 + (int64_t{1} << 20)};
}

MedMnist3d::MedMnist3d(std::string_view flag, Split split, const MedMnistOptions& options)
    : info_(&medmnist_info(flag)), split_(split), side_(options.size) {
  const std::string path = medmnist_path(flag, options);
  const DownloadOptions fetch = medmnist_download_options(flag, options.size);
  const std::string& want = fetch.expected_md5;
  if (options.download) download(medmnist_url(flag, options.size), path, fetch);
  KILN_CHECK(std::filesystem::is_regular_file(path), "medmnist: ", flag, " (", options.size,
             "^3) not found at ", path,
             " (the folder is MedMnistOptions::root, else $MEDMNIST_ROOT, else ~/.medmnist); fetch it with `kiln data "
             "download ",
             flag, options.size == 64 ? " --size 64" : "", "` (or MedMnistOptions::download), or download ",
             medmnist_url(flag, options.size), " to that path");
  if (options.check_md5) {
    const std::string got = md5_of_file(path);
    KILN_CHECK(got == want, "medmnist: ", path, " has MD5 ", got, ", not the official ", want,
               " (a partial or altered download: fetch it again with `kiln data download ", flag,
               options.size == 64 ? " --size 64" : "", "`)");
  }
  const npz::File file(path);
  const std::string prefix(split_name(split));
  const int64_t expected = split == Split::Train ? info_->train
                           : split == Split::Val ? info_->val
                                                 : info_->test;
  images_ = file.load(prefix + "_images");
  const Tensor labels = file.load(prefix + "_labels");
  const std::vector<int64_t> image_shape = {expected, side_, side_, side_}, label_shape = {expected, 1};
  KILN_CHECK(images_.dtype() == DType::UInt8 && images_.sizes() == image_shape, "medmnist: ", path, ": ",
             prefix, "_images is ", images_.dtype(), " ", images_.sizes(), ", expected uint8 ", image_shape);
  KILN_CHECK(labels.sizes() == label_shape, "medmnist: ", path, ": ", prefix, "_labels has shape ",
             labels.sizes(), ", expected ", label_shape);
  labels_ = labels.reshape({expected}).to(DType::Int64);
  const int64_t classes = static_cast<int64_t>(info_->labels.size());
  KILN_CHECK(expected == 0 || (labels_.min().item<int64_t>() >= 0 && labels_.max().item<int64_t>() < classes),
             "medmnist: ", path, ": ", prefix, "_labels holds a value outside 0..", classes - 1);
  images_ = images_.contiguous();
}

Sample MedMnist3d::get(int64_t index) const {
  check_index(index);
  return {.tensors = {{kImage, images_.select(0, index).unsqueeze(0)}, {kLabel, labels_.select(0, index)}},
          .metadata = {}};
}

std::string MedMnist3d::name() const {
  return "MedMNIST " + sized_name(info_->flag, side_) + " " + std::string(split_name(split_));
}

}  // namespace kiln::data
