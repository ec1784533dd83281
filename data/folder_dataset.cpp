// FolderDataset and CsvDataset (folder_dataset.h): the file lists and labels are built
// once in the constructor (every error up front, naming the file and line; the folder
// walked by list_class_folder, data/scan_list.h); get() decodes one file through the
// cache (load_scan, data/scan_dataset.h).
#include "data/folder_dataset.h"

#include <filesystem>

#include "core/error.h"
#include "core/ops.h"
#include "data/csv.h"
#include "data/label_text.h"
#include "data/scan_dataset.h"
#include "data/scan_list.h"

namespace kiln::data {
namespace {
namespace fs = std::filesystem;
}

FolderDataset::FolderDataset(const std::string& root, FolderDatasetOptions options)
    : root_(root), options_(options), cache_(std::make_unique<VolumeCache>(options.cache_bytes)) {
  const ClassFolder folder = list_class_folder(root, "FolderDataset");
  classes_ = folder.classes;
  for (size_t c = 0; c < folder.files.size(); ++c) {
    for (const std::string& file : folder.files[c]) {
      files_.push_back(file);
      targets_.push_back(static_cast<int64_t>(c));
    }
  }
}

Sample FolderDataset::get(int64_t index) const {
  check_index(index);
  const auto i = static_cast<size_t>(index);
  return {.tensors = {{kImage, load_scan({files_[i]}, {.reorient_to_ras = options_.reorient_to_ras}, *cache_)},
                      {kLabel, full({}, targets_[i], {.dtype = DType::Int64})}},
          .metadata = {{"path", files_[i]}, {"class", classes_[static_cast<size_t>(targets_[i])]}}};
}

CsvDataset::CsvDataset(const std::string& csv_path, CsvDatasetOptions options)
    : csv_path_(csv_path),
      options_(std::move(options)),
      cache_(std::make_unique<VolumeCache>(options_.cache_bytes)) {
  const CsvTable table = read_csv(csv_path);
  const std::string what = "CsvDataset '" + csv_path + "'";
  const int64_t path_column = table.column(options_.path_column);
  KILN_CHECK(path_column >= 0, what, ": no column '", options_.path_column, "'");
  KILN_CHECK(!options_.label_columns.empty(), what, ": no label columns given");
  KILN_CHECK(options_.target != CsvDatasetOptions::Target::Class || options_.label_columns.size() == 1, what,
             ": a class target takes one label column, got ", options_.label_columns.size());
  std::vector<int64_t> label_columns;
  for (const std::string& name : options_.label_columns) {
    label_columns.push_back(table.column(name));
    KILN_CHECK(label_columns.back() >= 0, what, ": no label column '", name, "'");
  }
  const int64_t split_column = options_.split ? table.column(options_.split_column) : -1;
  KILN_CHECK(!options_.split || split_column >= 0, what, ": no split column '", options_.split_column, "'");
  const fs::path base = fs::path(csv_path).parent_path();
  for (size_t r = 0; r < table.rows.size(); ++r) {
    const std::vector<std::string>& row = table.rows[r];
    if (options_.split && row[static_cast<size_t>(split_column)] != *options_.split) continue;
    const std::string where = what + " line " + std::to_string(table.lines[r]);
    const std::string& file = row[static_cast<size_t>(path_column)];
    KILN_CHECK(!file.empty(), where, ": an empty path");
    KILN_CHECK(is_volume_file(file), where, ": '", file, "' is not a .nii.gz, .nii, .npy or .npz file");
    files_.push_back(fs::path(file).is_absolute() ? file : (base / file).string());
    if (options_.target == CsvDatasetOptions::Target::Class) {
      labels_.push_back(
          full({}, parse_class_index(row[static_cast<size_t>(label_columns[0])], where), {.dtype = DType::Int64}));
      continue;
    }
    std::vector<float> values;
    for (int64_t c : label_columns) {
      const double v = parse_number(row[static_cast<size_t>(c)], where);
      KILN_CHECK(options_.target != CsvDatasetOptions::Target::MultiLabel || v == 0 || v == 1, where,
                 ": a multi-label column holds 0 or 1, got ", v);
      values.push_back(static_cast<float>(v));
    }
    labels_.push_back(tensor(values, {static_cast<int64_t>(values.size())}));
  }
}

Sample CsvDataset::get(int64_t index) const {
  check_index(index);
  const auto i = static_cast<size_t>(index);
  return {.tensors = {{kImage, load_scan({files_[i]}, {.reorient_to_ras = options_.reorient_to_ras}, *cache_)},
                      {kLabel, labels_[i]}},
          .metadata = {{"path", files_[i]}}};
}

}  // namespace kiln::data
