// FolderDataset and CsvDataset (folder_dataset.h): the file lists and labels are built
// once in the constructor (every error up front, naming the file and line); get() decodes
// one file, through the cache.
#include "data/folder_dataset.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <filesystem>

#include "core/error.h"
#include "core/ops.h"
#include "data/csv.h"

namespace kiln::data {
namespace {

namespace fs = std::filesystem;

// Sorted entries of `dir` that `keep` accepts (by full path), or an error naming it.
std::vector<fs::path> sorted_entries(const fs::path& dir,
                                     const std::function<bool(const fs::directory_entry&)>& keep) {
  std::error_code ec;
  std::vector<fs::path> entries;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (keep(*it)) entries.push_back(it->path());
  }
  KILN_CHECK(!ec, "FolderDataset: cannot list '", dir.string(), "': ", ec.message());
  std::sort(entries.begin(), entries.end());
  return entries;
}

Tensor load_cached(VolumeCache& cache, const std::string& path, bool reorient) {
  return cache.get(path, [&] { return load_volume(path, {.reorient_to_ras = reorient}); });
}

double parse_number(const std::string& text, const std::string& where) {
  const char* begin = text.c_str();
  char* end = nullptr;
  errno = 0;
  const double value = std::strtod(begin, &end);
  KILN_CHECK(end != begin && *end == '\0' && errno == 0 && std::isfinite(value), where, ": '", text,
             "' is not a finite number");
  return value;
}

int64_t parse_class(const std::string& text, const std::string& where) {
  int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  KILN_CHECK(error == std::errc() && end == text.data() + text.size() && value >= 0, where, ": '", text,
             "' is not a class index (an integer >= 0)");
  return value;
}

}  // namespace

FolderDataset::FolderDataset(const std::string& root, FolderDatasetOptions options)
    : root_(root), options_(options), cache_(std::make_unique<VolumeCache>(options.cache_bytes)) {
  std::error_code ec;
  KILN_CHECK(fs::is_directory(root, ec), "FolderDataset: '", root, "' is not a folder");
  const std::vector<fs::path> class_dirs = sorted_entries(root, [](const fs::directory_entry& e) {
    std::error_code ec;
    return e.is_directory(ec);  // an entry that cannot be examined is skipped, never a throw
  });
  KILN_CHECK(!class_dirs.empty(), "FolderDataset: '", root, "' has no class folders (root/<class>/<files>)");
  for (const fs::path& dir : class_dirs) {
    const std::vector<fs::path> volumes = sorted_entries(dir, [](const fs::directory_entry& e) {
      std::error_code ec;
      return !e.is_directory(ec) && is_volume_file(e.path().filename().string());
    });
    KILN_CHECK(!volumes.empty(), "FolderDataset: class folder '", dir.string(),
               "' has no .nii.gz, .nii or .npy files");
    const auto label = static_cast<int64_t>(classes_.size());
    classes_.push_back(dir.filename().string());
    for (const fs::path& file : volumes) {
      files_.push_back(file.string());
      targets_.push_back(label);
    }
  }
}

Sample FolderDataset::get(int64_t index) const {
  check_index(index);
  const auto i = static_cast<size_t>(index);
  return {.tensors = {{"image", load_cached(*cache_, files_[i], options_.reorient_to_ras)},
                      {"label", full({}, targets_[i], {.dtype = DType::Int64})}},
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
    KILN_CHECK(is_volume_file(file), where, ": '", file, "' is not a .nii.gz, .nii or .npy file");
    files_.push_back(fs::path(file).is_absolute() ? file : (base / file).string());
    if (options_.target == CsvDatasetOptions::Target::Class) {
      labels_.push_back(
          full({}, parse_class(row[static_cast<size_t>(label_columns[0])], where), {.dtype = DType::Int64}));
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
  return {.tensors = {{"image", load_cached(*cache_, files_[i], options_.reorient_to_ras)},
                      {"label", labels_[i]}},
          .metadata = {{"path", files_[i]}}};
}

}  // namespace kiln::data
