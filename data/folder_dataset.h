// Datasets of one's own volume files:
//
//   FolderDataset: root/<class name>/<file>.nii.gz|.nii|.npy, torchvision's ImageFolder
//   for 3D scans. Classes are the sub-folders sorted by name (class i = the i-th), files
//   are sorted within each class; other files are ignored. An empty root, a missing root
//   or a class folder without volume files is an error.
//
//   CsvDataset: a manifest, one row per sample: a path column (relative to the CSV's
//   folder, or absolute), label column(s) and, optionally, a split column. The target is a
//   class (one integer column -> int64 []), multi-label (several 0/1 columns -> float32
//   [n]) or regression (one or more number columns -> float32 [n]). `split` keeps only
//   the rows whose split column equals it (e.g. "train").
//
// A sample is {"image": [C, X, Y, Z] (volume_file.h), "label": ...} with metadata "path"
// (and "class" for folders). Files are decoded in get(), so workers decode in parallel;
// with cache_bytes > 0 decoded volumes are kept (VolumeCache) up to that many bytes.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "data/volume_cache.h"
#include "data/volume_file.h"

namespace kiln::data {

struct FolderDatasetOptions {
  bool reorient_to_ras = false;
  int64_t cache_bytes = 0;
};

class FolderDataset final : public Dataset {
 public:
  explicit FolderDataset(const std::string& root, FolderDatasetOptions options = {});
  int64_t size() const override { return static_cast<int64_t>(files_.size()); }
  Sample get(int64_t index) const override;
  std::string name() const override { return "FolderDataset " + root_; }
  const std::vector<std::string>& classes() const { return classes_; }
  // Each sample's class index, in order (for a WeightedRandomSampler).
  const std::vector<int64_t>& targets() const { return targets_; }
  const VolumeCache& cache() const { return *cache_; }

 private:
  std::string root_;
  FolderDatasetOptions options_;
  std::vector<std::string> classes_;
  std::vector<std::string> files_;
  std::vector<int64_t> targets_;
  std::unique_ptr<VolumeCache> cache_;
};

struct CsvDatasetOptions {
  enum class Target { Class, MultiLabel, Regression };
  std::string path_column = "path";
  std::vector<std::string> label_columns = {"label"};
  Target target = Target::Class;
  std::string split_column = "split";
  std::optional<std::string> split = std::nullopt;  // keep only this split's rows
  bool reorient_to_ras = false;
  int64_t cache_bytes = 0;
};

class CsvDataset final : public Dataset {
 public:
  explicit CsvDataset(const std::string& csv_path, CsvDatasetOptions options = {});
  int64_t size() const override { return static_cast<int64_t>(files_.size()); }
  Sample get(int64_t index) const override;
  std::string name() const override { return "CsvDataset " + csv_path_; }
  const VolumeCache& cache() const { return *cache_; }

 private:
  std::string csv_path_;
  CsvDatasetOptions options_;
  std::vector<std::string> files_;
  std::vector<Tensor> labels_;
  std::unique_ptr<VolumeCache> cache_;
};

}  // namespace kiln::data
