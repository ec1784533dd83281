// read_scan_list and list_class_folder (data/scan_list.h): the folder walked, or the CSV
// read, with each row's problems kept rather than thrown.
#include "data/scan_list.h"

#include <algorithm>
#include <filesystem>
#include <functional>

#include "core/error.h"
#include "core/text_list.h"
#include "data/csv.h"
#include "data/volume_file.h"

namespace kiln::data {
namespace {

namespace fs = std::filesystem;

// Sorted entries of `dir` that `keep` accepts (by full path), or an error naming it.
std::vector<fs::path> sorted_entries(const fs::path& dir, const std::function<bool(const fs::directory_entry&)>& keep,
                                     const char* who) {
  std::error_code ec;
  std::vector<fs::path> entries;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (keep(*it)) entries.push_back(it->path());
  }
  KILN_CHECK(!ec, who, ": cannot list '", dir.string(), "': ", ec.message());
  std::sort(entries.begin(), entries.end());
  return entries;
}

// A folder that is not hidden (".ipynb_checkpoints", ".git" are not classes).
bool is_folder(const fs::directory_entry& entry) {
  std::error_code ec;
  return entry.is_directory(ec) && !entry.path().filename().string().starts_with(".");  // unexaminable: skipped
}

// A label's text without the spaces and tabs around it (" 0" and "0" are one class).
std::string trimmed(const std::string& text) {
  const size_t first = text.find_first_not_of(" \t");
  if (first == std::string::npos) return "";
  return text.substr(first, text.find_last_not_of(" \t") - first + 1);
}

// The volume files under `dir`, at any depth (as ImageFolder walks a class folder),
// hidden folders left out, sorted.
std::vector<fs::path> volume_files_under(const fs::path& dir, const char* who) {
  std::vector<fs::path> files;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec), end;
       !ec && it != end; it.increment(ec)) {
    std::error_code entry_ec;
    const std::string name = it->path().filename().string();
    if (it->is_directory(entry_ec)) {
      if (name.starts_with(".")) it.disable_recursion_pending();
      continue;
    }
    if (is_volume_file(name)) files.push_back(it->path());
  }
  KILN_CHECK(!ec, who, ": cannot list '", dir.string(), "': ", ec.message());
  std::sort(files.begin(), files.end());
  return files;
}

bool is_split_name(const std::string& name) {
  return std::find_if(std::begin(kSplitNames), std::end(kSplitNames),
                      [&](const char* split) { return name == split; }) != std::end(kSplitNames);
}

ScanList read_folder(const std::string& root) {
  ScanList list{.source = root, .image_columns = {"image"}, .label_columns = {"class"}, .folder = true};
  const std::vector<fs::path> children = sorted_entries(root, is_folder, "scans");
  const bool split_layout = !children.empty() && std::all_of(children.begin(), children.end(), [](const fs::path& c) {
    return is_split_name(c.filename().string());
  });
  const auto add = [&](const std::string& folder, const std::string& split) {
    const ClassFolder classes = list_class_folder(folder, "scans");
    for (size_t c = 0; c < classes.classes.size(); ++c) {
      for (const std::string& file : classes.files[c])
        list.records.push_back({.images = {file}, .labels = {classes.classes[c]}, .split = split, .where = file});
    }
  };
  if (!split_layout) {
    add(root, "");
    return list;
  }
  list.has_splits = true;
  for (const fs::path& child : children) add(child.string(), child.filename().string());
  return list;
}

std::vector<int64_t> columns_of(const CsvTable& table, const std::vector<std::string>& names, const char* what,
                                const std::string& source) {
  KILN_CHECK(!names.empty(), "scans '", source, "': no ", what, " columns given");
  std::vector<int64_t> columns;
  for (const std::string& name : names) {
    KILN_CHECK(std::count(names.begin(), names.end(), name) == 1, "scans '", source, "': the ", what, " column '",
               name, "' is given twice");
    columns.push_back(table.column(name));
    KILN_CHECK(columns.back() >= 0, "scans '", source, "': no ", what, " column '", name, "' (the columns are ",
               joined(table.columns), ")");
  }
  return columns;
}

ScanList read_manifest(const std::string& csv, const ScanListOptions& options) {
  const CsvTable table = read_csv(csv);
  ScanList list{.source = csv, .image_columns = options.image_columns};
  const std::vector<int64_t> images = columns_of(table, options.image_columns, "image", csv);
  std::vector<int64_t> labels;
  if (options.with_labels) {
    list.label_columns = options.label_columns;
    labels = columns_of(table, options.label_columns, "label", csv);
  }
  const int64_t split = table.column(options.split_column);
  list.has_splits = split >= 0;
  const fs::path base = fs::path(csv).parent_path();
  for (size_t r = 0; r < table.rows.size(); ++r) {
    const std::vector<std::string>& row = table.rows[r];
    ScanRecord record{.where = csv + " line " + std::to_string(table.lines[r])};
    for (const int64_t c : images) {
      const std::string& file = row[static_cast<size_t>(c)];
      if (file.empty()) {
        list.problems.push_back(record.where + ": an empty path in column '" + table.columns[static_cast<size_t>(c)] + "'");
      } else if (!is_volume_file(file)) {
        list.problems.push_back(record.where + ": '" + file + "' is not a .nii.gz, .nii, .npy or .npz file");
      }
      record.images.push_back(fs::path(file).is_absolute() || file.empty() ? file : (base / file).string());
    }
    for (const int64_t c : labels) record.labels.push_back(trimmed(row[static_cast<size_t>(c)]));
    if (split >= 0) {
      record.split = row[static_cast<size_t>(split)];
      if (!is_split_name(record.split))
        list.problems.push_back(record.where + ": split '" + record.split + "' is not train, val or test");
    }
    list.records.push_back(std::move(record));
  }
  return list;
}

}  // namespace

ClassFolder list_class_folder(const std::string& root, const char* who) {
  std::error_code ec;
  KILN_CHECK(fs::is_directory(root, ec), who, ": '", root, "' is not a folder");
  const std::vector<fs::path> class_dirs = sorted_entries(root, is_folder, who);
  KILN_CHECK(!class_dirs.empty(), who, ": '", root, "' has no class folders (root/<class>/<files>)");
  ClassFolder folder;
  for (const fs::path& dir : class_dirs) {
    const std::vector<fs::path> volumes = volume_files_under(dir, who);
    KILN_CHECK(!volumes.empty(), who, ": class folder '", dir.string(), "' has no .nii.gz, .nii, .npy or .npz files");
    folder.classes.push_back(dir.filename().string());
    folder.files.emplace_back();
    for (const fs::path& file : volumes) folder.files.back().push_back(file.string());
  }
  return folder;
}

ScanList read_scan_list(const std::string& path, const ScanListOptions& options) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) return read_folder(path);
  KILN_CHECK(fs::exists(path, ec), "scans '", path, "': no such file or folder");
  KILN_CHECK(path.ends_with(".csv"), "scans '", path, "': a manifest is a .csv file (or give a folder)");
  return read_manifest(path, options);
}

}  // namespace kiln::data
