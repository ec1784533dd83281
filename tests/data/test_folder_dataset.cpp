// Datasets of one's own files (data/folder_dataset.h) and what they stand on: CSV parsing
// (data/csv.h), load_volume (data/volume_file.h) and the decoded-volume cache
// (data/volume_cache.h). Trees of .npy files written here and the NIfTI fixtures of
// tests/data/nifti/; bad trees and manifests are errors naming the file and line; a
// threaded loader over a cached dataset gives the same batches as an uncached one.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "core/ops.h"
#include "data/csv.h"
#include "data/folder_dataset.h"
#include "data/loader.h"
#include "data/nifti.h"
#include "data/npy.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using data::CsvDataset;
using data::CsvDatasetOptions;
using data::FolderDataset;

const std::string kNifti = std::string(KILN_SOURCE_DIR) + "/tests/data/nifti/";

// root/benign/{a.npy, b.nii.gz, notes.txt}, root/malignant/{c.npy, d.nii}.
struct Tree {
  testing::TempFolder folder;
  std::string root = folder.file("scans");
  Tensor a = testing::random_for({4, 5, 6}, DType::Float32, 1);
  Tensor c = testing::random_for({2, 3, 3, 3}, DType::Float32, 2);
  Tree() {
    fs::create_directories(root + "/benign");
    fs::create_directories(root + "/malignant");
    data::npy::save(a, root + "/benign/a.npy");
    fs::copy_file(kNifti + "oblique.nii.gz", root + "/benign/b.nii.gz");
    std::ofstream(root + "/benign/notes.txt") << "not a volume";
    data::npy::save(c, root + "/malignant/c.npy");
    fs::copy_file(kNifti + "four_d.nii", root + "/malignant/d.nii");
  }
};

TEST(FolderDataset, ClassesAreSortedFoldersAndSamplesTheirFiles) {
  const Tree tree;
  const FolderDataset dataset(tree.root);
  EXPECT_EQ(dataset.classes(), (std::vector<std::string>{"benign", "malignant"}));
  EXPECT_EQ(dataset.size(), 4);
  EXPECT_EQ(dataset.targets(), (std::vector<int64_t>{0, 0, 1, 1}));
  const data::Sample a = dataset.get(0);
  EXPECT_TRUE(testing::all_equal(a.at("image"), tree.a.unsqueeze(0)));
  EXPECT_EQ(a.at("label").item<int64_t>(), 0);
  EXPECT_EQ(a.metadata.at("path"), tree.root + "/benign/a.npy");
  EXPECT_EQ(a.metadata.at("class"), "benign");
  EXPECT_TRUE(
      testing::all_equal(dataset.get(1).at("image"), data::nifti::read(kNifti + "oblique.nii.gz").data));
  EXPECT_TRUE(testing::all_equal(dataset.get(2).at("image"), tree.c));
  const data::Sample d = dataset.get(3);
  EXPECT_EQ(d.at("image").sizes(), (std::vector<int64_t>{2, 3, 4, 2}));
  EXPECT_EQ(d.at("label").item<int64_t>(), 1);
  EXPECT_EQ(d.metadata.at("class"), "malignant");
  const FolderDataset canonical(tree.root, {.reorient_to_ras = true});
  EXPECT_EQ(canonical.get(1).at("image").sizes(), (std::vector<int64_t>{1, 3, 5, 4}));
  EXPECT_KILN_ERROR(dataset.get(4), "FolderDataset");
}

TEST(FolderDataset, BadTreesAreErrorsNamingTheFolder) {
  const testing::TempFolder folder;
  EXPECT_KILN_ERROR(FolderDataset(folder.file("missing")), "missing", "is not a folder");
  fs::create_directories(folder.file("flat"));
  data::npy::save(zeros({2, 2, 2}), folder.file("flat/x.npy"));
  EXPECT_KILN_ERROR(FolderDataset(folder.file("flat")), "has no class folders");
  fs::create_directories(folder.file("tree/empty"));
  std::ofstream(folder.file("tree/empty/readme.md")) << "no scans yet";
  EXPECT_KILN_ERROR(FolderDataset(folder.file("tree")), "class folder", "empty", "has no .nii.gz");
  // A file that breaks after the listing: an error naming it when its sample is read.
  const Tree tree;
  const FolderDataset dataset(tree.root);
  std::ofstream(tree.root + "/malignant/c.npy") << "broken";
  EXPECT_KILN_ERROR(dataset.get(2), "c.npy");
}

TEST(VolumeCache, KeepsVolumesUpToItsBudgetAndDropsTheLeastRecentlyUsed) {
  data::VolumeCache cache(3 * 400);  // room for three [100] float32 volumes
  int loads = 0;
  const auto load = [&](double value) {
    return [&loads, value] {
      ++loads;
      return full({100}, value);
    };
  };
  EXPECT_EQ(cache.get("a", load(1)).sum().item<double>(), 100);
  cache.get("b", load(2));
  cache.get("c", load(3));
  EXPECT_EQ(loads, 3);
  cache.get("a", load(1));  // a hit: a is now the most recent
  EXPECT_EQ(loads, 3);
  cache.get("d", load(4));  // evicts b, the least recently used
  EXPECT_EQ(cache.size(), 3);
  EXPECT_EQ(cache.bytes(), 1200);
  cache.get("a", load(1));
  EXPECT_EQ(loads, 4);
  cache.get("b", load(2));
  EXPECT_EQ(loads, 5);
  EXPECT_EQ(cache.hits(), 2);
  EXPECT_EQ(cache.misses(), 5);
  // Larger than the whole budget: returned, never kept.
  data::VolumeCache small(100);
  EXPECT_EQ(small.get("big", load(5)).numel(), 100);
  EXPECT_EQ(small.size(), 0);
  data::VolumeCache none(0);
  none.get("x", load(6));
  EXPECT_EQ(none.size(), 0);
}

TEST(FolderDataset, AThreadedLoaderOverACachedDatasetGivesTheUncachedBatches) {
  testing::with_watchdog(std::chrono::seconds(60), [] {
    const Tree tree;
    auto cached =
        std::make_shared<FolderDataset>(tree.root, data::FolderDatasetOptions{.cache_bytes = 1 << 20});
    const auto plain = std::make_shared<FolderDataset>(tree.root);
    const auto first_two = [](std::shared_ptr<const data::Dataset> d) {
      return std::make_shared<data::Subset>(std::move(d), std::vector<int64_t>{0, 2, 0, 2});
    };
    for (int epoch = 0; epoch < 2; ++epoch) {
      data::DataLoader with_cache(first_two(cached), {.batch_size = 1, .num_workers = 2});
      data::DataLoader without(first_two(plain), {.batch_size = 1});
      std::vector<Tensor> a, b;
      for (data::Batch& batch : with_cache.epoch(epoch)) a.push_back(batch.at("image"));
      for (data::Batch& batch : without.epoch(epoch)) b.push_back(batch.at("image"));
      ASSERT_EQ(a.size(), b.size());
      for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(testing::all_equal(a[i], b[i]));
    }
    EXPECT_EQ(cached->cache().size(), 2);
    EXPECT_GE(cached->cache().hits(), 4);
  });
}

// ---- CSV ---------------------------------------------------------------------------------

TEST(Csv, QuotesCrlfBomAndEmptyLines) {
  const data::CsvTable table = data::parse_csv(
      "\xEF\xBB\xBFpath,label\r\n\"a, b.npy\",1\r\n\r\n\"say \"\"hi\"\"\",2\n\"two\nlines\",3", "m.csv");
  EXPECT_EQ(table.columns, (std::vector<std::string>{"path", "label"}));
  ASSERT_EQ(table.rows.size(), 3u);
  EXPECT_EQ(table.rows[0], (std::vector<std::string>{"a, b.npy", "1"}));
  EXPECT_EQ(table.rows[1], (std::vector<std::string>{"say \"hi\"", "2"}));
  EXPECT_EQ(table.rows[2], (std::vector<std::string>{"two\nlines", "3"}));
  EXPECT_EQ(table.lines, (std::vector<int64_t>{2, 4, 5}));
  EXPECT_EQ(table.column("label"), 1);
  EXPECT_EQ(table.column("nope"), -1);
}

TEST(Csv, MalformedTablesAreErrorsNamingTheLine) {
  EXPECT_KILN_ERROR(data::parse_csv("a,b\n1,2,3\n", "m.csv"), "m.csv",
                    "line 2 has 3 fields, the header has 2");
  EXPECT_KILN_ERROR(data::parse_csv("a,b\n\"1,2\n", "m.csv"), "line 2", "never closed");
  EXPECT_KILN_ERROR(data::parse_csv("a,b\n\"1\"x,2\n", "m.csv"), "line 2", "after a closing quote");
  EXPECT_KILN_ERROR(data::parse_csv("a,a\n", "m.csv"), "column 'a' twice");
  EXPECT_KILN_ERROR(data::parse_csv("a,,b\n", "m.csv"), "empty column name");
  EXPECT_KILN_ERROR(data::parse_csv("", "m.csv"), "no header row");
  EXPECT_KILN_ERROR(data::read_csv("/no/such/manifest.csv"), "manifest.csv", "no such file");
}

TEST(CsvDataset, ClassMultiLabelAndRegressionTargetsWithSplits) {
  const Tree tree;
  const std::string csv = tree.folder.file("manifest.csv");
  std::ofstream(csv) << "path,label,split,tumour,cyst,volume_ml\n"
                     << "scans/benign/a.npy,0,train,0,1,12.5\n"
                     << tree.root << "/malignant/c.npy,1,val,1,0,-0.25\n"
                     << "\"scans/benign/b.nii.gz\",0,train,1,1,3\n";
  const CsvDataset all(csv);
  ASSERT_EQ(all.size(), 3);
  EXPECT_TRUE(testing::all_equal(all.get(0).at("image"), tree.a.unsqueeze(0)));
  EXPECT_EQ(all.get(1).at("label").item<int64_t>(), 1);
  EXPECT_EQ(all.get(0).metadata.at("path"), tree.folder.file("scans/benign/a.npy"));
  const CsvDataset train(csv, {.split = "train"});
  EXPECT_EQ(train.size(), 2);
  EXPECT_EQ(train.get(1).at("image").sizes(), (std::vector<int64_t>{1, 5, 4, 3}));
  const CsvDataset multi(
      csv, {.label_columns = {"tumour", "cyst"}, .target = CsvDatasetOptions::Target::MultiLabel});
  EXPECT_TRUE(testing::all_equal(multi.get(0).at("label"), tensor(std::vector<float>{0, 1}, {2})));
  const CsvDataset regression(
      csv, {.label_columns = {"volume_ml"}, .target = CsvDatasetOptions::Target::Regression});
  EXPECT_TRUE(testing::all_equal(regression.get(1).at("label"), tensor(std::vector<float>{-0.25f}, {1})));
}

TEST(CsvDataset, BadManifestsAreErrorsNamingTheFileAndLine) {
  const testing::TempFolder folder;
  const auto manifest = [&](const std::string& name, const std::string& text) {
    const std::string path = folder.file(name);
    std::ofstream(path) << text;
    return path;
  };
  EXPECT_KILN_ERROR(CsvDataset(manifest("a.csv", "file,label\nx.npy,1\n")), "a.csv", "no column 'path'");
  EXPECT_KILN_ERROR(CsvDataset(manifest("b.csv", "path,label\nx.npy,1\ny.npy,two\n")), "b.csv' line 3",
                    "'two' is not a class index");
  EXPECT_KILN_ERROR(CsvDataset(manifest("c.csv", "path,label\nx.png,1\n")), "c.csv' line 2", "x.png",
                    "not a .nii.gz");
  EXPECT_KILN_ERROR(CsvDataset(manifest("d.csv", "path,label\n,1\n")), "d.csv' line 2", "an empty path");
  EXPECT_KILN_ERROR(CsvDataset(manifest("e.csv", "path,label\nx.npy,-1\n")), "not a class index");
  EXPECT_KILN_ERROR(
      CsvDataset(manifest("f.csv", "path,a,b\nx.npy,1,0.5\n"),
                 {.label_columns = {"a", "b"}, .target = CsvDatasetOptions::Target::MultiLabel}),
      "f.csv' line 2", "holds 0 or 1");
  EXPECT_KILN_ERROR(CsvDataset(manifest("g.csv", "path,a\nx.npy,nan\n"),
                               {.label_columns = {"a"}, .target = CsvDatasetOptions::Target::Regression}),
                    "'nan' is not a finite number");
  EXPECT_KILN_ERROR(CsvDataset(manifest("h.csv", "path,label\nx.npy,1\n"), {.split = "train"}),
                    "no split column 'split'");
  EXPECT_KILN_ERROR(CsvDataset(manifest("i.csv", "path,a,b\nx.npy,1,2\n"), {.label_columns = {"a", "b"}}),
                    "a class target takes one label column");
  const CsvDataset missing_file(manifest("j.csv", "path,label\nnot_there.npy,1\n"));
  EXPECT_KILN_ERROR(missing_file.get(0), "not_there.npy");
}

}  // namespace
}  // namespace kiln
