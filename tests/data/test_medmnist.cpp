// MedMNIST 3D (data/medmnist.h): the facts of MedMNIST v3's info.py, where files are
// looked for (Note [MedMNIST files]), the errors for a missing, altered or malformed file;
// and, when the real AdrenalMNIST3D and VesselMNIST3D files are where MedMNIST keeps them
// ($MEDMNIST_ROOT, else ~/.medmnist: Note [MedMNIST files]), those files at 28^3 and
// 64^3: MD5 checked, counts, shapes, samples and label values numpy read. Without them
// those tests skip, saying where they looked.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/ops.h"
#include "data/medmnist.h"
#include "data/npz.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

using data::MedMnist3d;
using data::MedMnistOptions;
using data::Split;

// Whether MedMNIST's file of `flag` at `size` is where MedMnist3d looks by default.
bool have(std::string_view flag, int64_t size = 28) {
  return std::filesystem::exists(data::medmnist_path(flag, {.size = size}));
}

TEST(MedMnist, InfoListsTheSixDatasets) {
  std::vector<std::string> flags;
  for (const auto& info : data::medmnist_3d_datasets()) flags.emplace_back(info.flag);
  EXPECT_EQ(flags, (std::vector<std::string>{"organmnist3d", "nodulemnist3d", "adrenalmnist3d",
                                             "fracturemnist3d", "vesselmnist3d", "synapsemnist3d"}));
  const data::MedMnistInfo& organ = data::medmnist_info("organmnist3d");
  EXPECT_EQ(organ.labels.size(), 11u);
  EXPECT_EQ(organ.labels[0], "liver");
  EXPECT_EQ(organ.task, "multi-class");
  EXPECT_EQ(data::medmnist_info("fracturemnist3d").labels.size(), 3u);
  EXPECT_EQ(data::medmnist_info("vesselmnist3d").train, 1335);
  EXPECT_KILN_ERROR(data::medmnist_info("pathmnist"), "no 3D dataset 'pathmnist'", "adrenalmnist3d");
  EXPECT_EQ(data::split_from_name("val"), Split::Val);
  EXPECT_KILN_ERROR(data::split_from_name("valid"), "no split 'valid'");
}

TEST(MedMnist, FilesAreLookedUpAsMedMnistDoes) {
  EXPECT_EQ(data::medmnist_path("adrenalmnist3d", {.root = "/data", .size = 64}),
            "/data/adrenalmnist3d_64.npz");
  EXPECT_EQ(data::medmnist_url("vesselmnist3d", 28),
            "https://zenodo.org/records/10519652/files/vesselmnist3d.npz?download=1");
  EXPECT_KILN_ERROR(data::medmnist_path("adrenalmnist3d", {.size = 32}), "size 28 or 64, not 32");
  const char* old_root = std::getenv("MEDMNIST_ROOT");
  const std::string saved = old_root != nullptr ? old_root : "";
  ::setenv("MEDMNIST_ROOT", "/env/root", 1);
  EXPECT_EQ(data::medmnist_path("nodulemnist3d"), "/env/root/nodulemnist3d.npz");
  ::unsetenv("MEDMNIST_ROOT");
  if (std::getenv("HOME") != nullptr) {
    EXPECT_EQ(data::medmnist_path("nodulemnist3d"),
              std::string(std::getenv("HOME")) + "/.medmnist/nodulemnist3d.npz");
  }
  if (old_root != nullptr) ::setenv("MEDMNIST_ROOT", saved.c_str(), 1);
}

TEST(MedMnist, MissingAlteredAndMalformedFilesAreErrors) {
  const testing::TempFolder folder;
  EXPECT_KILN_ERROR(MedMnist3d("adrenalmnist3d", Split::Train, {.root = folder.path().string()}),
                    "adrenalmnist3d (28^3) not found at " + folder.file("adrenalmnist3d.npz"),
                    "`kiln data download adrenalmnist3d`",
                    "https://zenodo.org/records/10519652/files/adrenalmnist3d.npz");
  EXPECT_KILN_ERROR(MedMnist3d("vesselmnist3d", Split::Train, {.root = folder.path().string(), .size = 64}),
                    "`kiln data download vesselmnist3d --size 64`");
  // A file of the right name with other bytes: the MD5 tells.
  data::npz::save({{"train_images", zeros({2, 28, 28, 28}, {.dtype = DType::UInt8})},
                   {"train_labels", zeros({2, 1}, {.dtype = DType::UInt8})}},
                  folder.file("adrenalmnist3d.npz"));
  EXPECT_KILN_ERROR(MedMnist3d("adrenalmnist3d", Split::Train, {.root = folder.path().string()}),
                    "not the official bbd3c5a5576322bc4cdfea780653b1ce");
  // Without the MD5 check, the counts and arrays are still checked.
  EXPECT_KILN_ERROR(
      MedMnist3d("adrenalmnist3d", Split::Train, {.root = folder.path().string(), .check_md5 = false}),
      "train_images is uint8 [2, 28, 28, 28], expected uint8 [1188, 28, 28, 28]");
  EXPECT_KILN_ERROR(
      MedMnist3d("adrenalmnist3d", Split::Val, {.root = folder.path().string(), .check_md5 = false}),
      "has no array 'val_images'");
}

// Note [Download limits]: a download stops at the most bytes the file can hold: every
// sample stored uncompressed fits under it, and (where they are here) the real files do.
TEST(MedMnist, ADownloadStopsAtTheMostTheFileCanHold) {
  for (const auto& info : data::medmnist_3d_datasets()) {
    for (const int64_t size : {28, 64}) {
      SCOPED_TRACE(std::string(info.flag) + " at " + std::to_string(size));
      const data::DownloadOptions options = data::medmnist_download_options(info.flag, size);
      EXPECT_EQ(options.expected_md5, size == 28 ? info.md5_28 : info.md5_64);
      const int64_t voxels = (info.train + info.val + info.test) * size * size * size;
      EXPECT_GT(options.max_bytes, voxels);
      EXPECT_LT(options.max_bytes, voxels + voxels / 100 + (int64_t{4} << 20));
      const std::string path = data::medmnist_path(info.flag, {.size = size});
      if (std::filesystem::exists(path)) {
        EXPECT_LE(static_cast<int64_t>(std::filesystem::file_size(path)), options.max_bytes);
      }
    }
  }
  EXPECT_KILN_ERROR(data::medmnist_download_options("adrenalmnist3d", 32), "size 28 or 64, not 32");
}

TEST(MedMnist, RealAdrenalAndVesselFiles) {
  if (!have("adrenalmnist3d") || !have("vesselmnist3d")) {
    GTEST_SKIP() << "no " << data::medmnist_path("adrenalmnist3d") << " or vesselmnist3d.npz beside it";
  }
  const MedMnist3d train("adrenalmnist3d", Split::Train, {});
  EXPECT_EQ(train.size(), 1188);
  EXPECT_EQ(train.name(), "MedMNIST adrenalmnist3d train");
  const data::Sample sample = train.get(5);
  EXPECT_EQ(sample.at("image").sizes(), (std::vector<int64_t>{1, 28, 28, 28}));
  EXPECT_EQ(sample.at("image").dtype(), DType::UInt8);
  EXPECT_EQ(sample.at("label").dim(), 0);
  EXPECT_EQ(sample.at("label").dtype(), DType::Int64);
  EXPECT_EQ(train.labels().sum().item<int64_t>(), 259);  // numpy: train_labels.sum()
  const MedMnist3d val("adrenalmnist3d", Split::Val, {});
  EXPECT_EQ(val.images().to(DType::Int64).sum().item<int64_t>(), 8922960);  // numpy: val_images.sum()
  EXPECT_EQ(MedMnist3d("vesselmnist3d", Split::Test, {}).size(), 382);
}

TEST(MedMnist, RealFilesAt64) {
  if (!have("adrenalmnist3d", 64))
    GTEST_SKIP() << "no " << data::medmnist_path("adrenalmnist3d", {.size = 64});
  const MedMnist3d test("adrenalmnist3d", Split::Test, {.size = 64});
  EXPECT_EQ(test.size(), 298);
  EXPECT_EQ(test.get(0).at("image").sizes(), (std::vector<int64_t>{1, 64, 64, 64}));
  EXPECT_EQ(test.name(), "MedMNIST adrenalmnist3d_64 test");
}

}  // namespace
}  // namespace kiln
