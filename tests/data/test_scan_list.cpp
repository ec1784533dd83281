// Lists of one's own scans (data/scan_list.h) and their loading (data/scan_dataset.h,
// data/volume_file.h): a manifest's image, label and split columns with paths relative to
// it, or without labels; a folder's class folders, with or without train/val/test folders;
// row problems kept (each naming its line) while structural ones are errors; several files
// as channels; a spacing resampled from the NIfTI header; an .npz holding one array;
// headers read alone.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/ops.h"
#include "data/nifti.h"
#include "data/npy.h"
#include "data/npz.h"
#include "data/resample.h"
#include "data/scan_dataset.h"
#include "data/scan_list.h"
#include "data/volume_file.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using testing::TempFolder;

std::string write(const TempFolder& folder, const std::string& name, const std::string& text) {
  const std::string path = folder.file(name);
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path) << text;
  return path;
}

TEST(ScanList, AManifestsColumnsWithPathsRelativeToIt) {
  TempFolder folder;
  const std::string csv = write(folder, "study/scans.csv",
                                "id,t1,flair,grade,split\n"
                                "1,a/t1.nii.gz,a/flair.nii.gz,high,train\n"
                                "2,/abs/t1.nii,b/flair.npy,low,test\n");
  const data::ScanList list = data::read_scan_list(
      csv, {.image_columns = {"t1", "flair"}, .label_columns = {"grade"}, .split_column = "split"});
  ASSERT_EQ(list.records.size(), 2u);
  EXPECT_TRUE(list.has_splits);
  EXPECT_TRUE(list.problems.empty());
  EXPECT_EQ(list.records[0].images,
            (std::vector<std::string>{folder.file("study/a/t1.nii.gz"), folder.file("study/a/flair.nii.gz")}));
  EXPECT_EQ(list.records[1].images[0], "/abs/t1.nii");
  EXPECT_EQ(list.records[1].labels, std::vector<std::string>{"low"});
  EXPECT_EQ(list.records[1].split, "test");
  EXPECT_EQ(list.records[1].where, csv + " line 3");
}

// kiln predict's manifests name new scans: images only, no label column needed or read.
TEST(ScanList, AManifestWithoutLabelsIsReadWhenLabelsAreNotWanted) {
  TempFolder folder;
  const std::string csv = write(folder, "new.csv", "t1,t2\na.npy,b.npy\n");
  EXPECT_KILN_ERROR(data::read_scan_list(csv, {.image_columns = {"t1", "t2"}}), "no label column 'label'");
  const data::ScanList list = data::read_scan_list(csv, {.image_columns = {"t1", "t2"}, .with_labels = false});
  ASSERT_EQ(list.records.size(), 1u);
  EXPECT_TRUE(list.problems.empty());
  EXPECT_EQ(list.records[0].images, (std::vector<std::string>{folder.file("a.npy"), folder.file("b.npy")}));
  EXPECT_TRUE(list.records[0].labels.empty());
  EXPECT_TRUE(list.label_columns.empty());
}

TEST(ScanList, RowProblemsAreKeptNamingTheLineAndStructuralOnesAreErrors) {
  TempFolder folder;
  const std::string csv = write(folder, "m.csv", "image,label,split\n,1,train\nx.png,0,val\ny.npz,1,holdout\n");
  const data::ScanList list = data::read_scan_list(csv);
  ASSERT_EQ(list.problems.size(), 3u);
  EXPECT_NE(list.problems[0].find("line 2: an empty path"), std::string::npos) << list.problems[0];
  EXPECT_NE(list.problems[1].find("line 3: 'x.png' is not a .nii.gz, .nii, .npy or .npz file"), std::string::npos);
  EXPECT_NE(list.problems[2].find("line 4: split 'holdout' is not train, val or test"), std::string::npos);
  EXPECT_KILN_ERROR(data::read_scan_list(csv, {.label_columns = {"grade"}}), "no label column 'grade'",
                    "the columns are image, label, split");
  EXPECT_KILN_ERROR(data::read_scan_list(folder.file("none.csv")), "none.csv", "no such file or folder");
  EXPECT_KILN_ERROR(data::read_scan_list(write(folder, "m.txt", "x")), "a manifest is a .csv file");
  EXPECT_KILN_ERROR(data::read_scan_list(write(folder, "bad.csv", "image,label\n\"x,1\n")), "never closed");
}

TEST(ScanList, FoldersOfClassesWithAndWithoutSplitFolders) {
  TempFolder folder;
  for (const char* file : {"flat/b/2.npy", "flat/a/1.npy", "flat/a/0.nii.gz", "flat/a/notes.txt"})
    write(folder, file, "x");
  const data::ScanList flat = data::read_scan_list(folder.file("flat"));
  ASSERT_EQ(flat.records.size(), 3u);
  EXPECT_FALSE(flat.has_splits);
  EXPECT_EQ(flat.records[0].images[0], folder.file("flat/a/0.nii.gz"));  // classes, then files, sorted
  EXPECT_EQ(flat.records[2].labels[0], "b");
  for (const char* file : {"split/train/x/1.npy", "split/train/y/2.npy", "split/val/x/3.npy", "split/test/y/4.npy"})
    write(folder, file, "x");
  const data::ScanList split = data::read_scan_list(folder.file("split"));
  ASSERT_EQ(split.records.size(), 4u);
  EXPECT_TRUE(split.has_splits);
  EXPECT_EQ(split.records[2].split, "train");  // test/, then train/, then val/: folders sorted
  EXPECT_EQ(split.records[0].split, "test");
  EXPECT_EQ(split.records[3].labels[0], "x");
  fs::create_directories(folder.file("empty/c"));
  EXPECT_KILN_ERROR(data::read_scan_list(folder.file("empty")), "class folder", "has no .nii.gz");
}

TEST(ScanDataset, SeveralFilesAreChannelsOnOneGrid) {
  TempFolder folder;
  const Tensor t1 = testing::random_for({4, 5, 6}, DType::Float32, 1);
  const Tensor flair = testing::random_for({4, 5, 6}, DType::Float32, 2);
  data::npy::save(t1, folder.file("t1.npy"));
  data::npz::save({{"volume", flair}}, folder.file("flair.npz"));
  data::npy::save(zeros({4, 5, 7}), folder.file("other.npy"));
  const data::ScanDataset dataset({{.images = {folder.file("t1.npy"), folder.file("flair.npz")},
                                    .label = full({}, 1, {.dtype = DType::Int64})}},
                                  {.cache_bytes = 1 << 20});
  const data::Sample sample = dataset.get(0);
  EXPECT_TRUE(testing::all_equal(sample.at("image"), stack({t1, flair})));
  EXPECT_EQ(sample.metadata.at("path"), folder.file("t1.npy"));
  (void)dataset.get(0);
  EXPECT_EQ(dataset.cache().hits(), 1);
  EXPECT_KILN_ERROR(data::load_scan({folder.file("t1.npy"), folder.file("other.npy")}, {}), "other.npy",
                    "share one grid");
  data::npz::save({{"a", t1}, {"b", t1}}, folder.file("two.npz"));
  EXPECT_KILN_ERROR(data::load_volume(folder.file("two.npz")), "two.npz", "holds one array, this one holds 2");
  EXPECT_KILN_ERROR(data::load_scan({folder.file("t1.npy")}, {.spacing = {{1, 1, 1}}}), "t1.npy", "no geometry");
}

// Note [Resampling to a spacing]: 2 x 1.5 x 3 mm voxels at 1 mm become round(n s) voxels,
// by the trilinear resize over the same extent.
TEST(ScanDataset, ASpacingResamplesFromTheHeadersVoxelSize) {
  TempFolder folder;
  const Tensor volume = testing::random_for({1, 5, 4, 3}, DType::Float32, 3);
  const std::string path = folder.file("scan.nii.gz");
  data::nifti::write(path, volume, {.affine = {{{2, 0, 0, 0}, {0, 1.5, 0, 0}, {0, 0, 3, 0}, {0, 0, 0, 1}}}});
  const Tensor resampled = data::load_scan({path}, {.spacing = {{1, 1, 1}}});
  EXPECT_EQ(resampled.sizes(), (std::vector<int64_t>{1, 10, 6, 9}));
  EXPECT_TRUE(testing::all_close(resampled, data::resize(volume, {10, 6, 9}, data::Interpolation::Linear)));
  EXPECT_EQ(data::spacing_size({5, 4, 3}, {2, 1.5, 3}, {4, 4, 4}), (std::array<int64_t, 3>{3, 2, 2}));
  EXPECT_KILN_ERROR(data::spacing_size({1, 1, 1}, {1, 1, 1}, {100, 100, 100}), "1 voxels of 1 mm at 100 mm would be 0");
  const data::VolumeInfo info = data::read_volume_info(path);
  EXPECT_EQ(info.shape, (std::array<int64_t, 4>{1, 5, 4, 3}));
  EXPECT_EQ(*info.spacing, (std::array<double, 3>{2, 1.5, 3}));
}

// The header alone gives the shape load_volume would: reoriented, for NIfTI, as the voxels are.
TEST(VolumeInfo, TheHeaderAloneGivesTheLoadedShape) {
  const std::string oblique = std::string(KILN_SOURCE_DIR) + "/tests/data/nifti/oblique.nii.gz";
  for (const bool ras : {false, true}) {
    const Tensor loaded = data::load_volume(oblique, {.reorient_to_ras = ras});
    const data::VolumeInfo info = data::read_volume_info(oblique, {.reorient_to_ras = ras});
    EXPECT_EQ(std::vector<int64_t>(info.shape.begin(), info.shape.end()), loaded.sizes()) << ras;
  }
  TempFolder folder;
  data::npy::save(zeros({2, 3, 4, 5}, {.dtype = DType::UInt8}), folder.file("v.npy"));
  EXPECT_EQ(data::read_volume_info(folder.file("v.npy")).shape, (std::array<int64_t, 4>{2, 3, 4, 5}));
  data::npy::save(zeros({3, 4}), folder.file("flat.npy"));
  EXPECT_KILN_ERROR(data::read_volume_info(folder.file("flat.npy")), "flat.npy", "got shape [3, 4]");
  std::ofstream(folder.file("cut.nii.gz")) << "not gzip";
  EXPECT_KILN_ERROR(data::read_volume_info(folder.file("cut.nii.gz")), "cut.nii.gz");
}

}  // namespace
}  // namespace kiln
