// RunFolder (train/run_folder.h): paths from kRunFiles.
#include "train/run_folder.h"

#include <cstdlib>
#include <filesystem>

#include "core/atomic_file.h"
#include "core/error.h"
#include "train/checkpoint.h"

namespace kiln::train {
namespace fs = std::filesystem;

std::string RunFolder::path(RunFile file) const {
  const RunFileRow& row = kRunFiles[static_cast<size_t>(file)];
  return row.prefix ? root_ : (fs::path(root_) / row.name).string();
}

std::string RunFolder::checkpoint(int64_t epoch, int64_t batch) const {
  return (fs::path(path(RunFile::Checkpoints)) / checkpoint_name(epoch, batch)).string();
}

std::vector<std::string> RunFolder::checkpoints() const { return list_checkpoints(root_); }

bool RunFolder::holds_run() const { return !checkpoints().empty() || fs::exists(path(RunFile::Summary)); }

void RunFolder::create() const {
  std::error_code error;
  fs::create_directories(root_, error);
  KILN_CHECK(!error, "run folder ", root_, ": cannot create it: ", error.message());
}

namespace {

// A file Kiln writes in a run folder, by its name (the table's, a Kiln checkpoint's or a
// Kiln event file's).
bool is_run_file_name(const std::string& name) {
  for (const RunFileRow& row : kRunFiles) {
    if (row.prefix ? name.starts_with(row.name) && name.ends_with(".kiln") : name == row.name) return true;
  }
  return false;
}

// The folders no run may take: the file system's root, the home folder, the current one.
void check_safe(const std::string& root) {
  std::error_code error;
  const fs::path here = fs::weakly_canonical(root, error);
  const char* home = std::getenv("HOME");
  const std::pair<fs::path, const char*> unsafe[] = {{"/", "the file system's root"},
                                                     {home ? fs::weakly_canonical(home, error) : fs::path(), "your home folder"},
                                                     {fs::current_path(error), "the current folder"}};
  for (const auto& [folder, what] : unsafe) {
    KILN_CHECK(folder.empty() || here != folder, "run folder ", root, " is ", what,
               "; a run needs a folder of its own (--out runs/NAME)");
  }
}

}  // namespace

bool RunFolder::is_kilns() const {
  std::error_code error;
  if (fs::exists(path(RunFile::Marker), error)) return true;
  if (!checkpoints().empty()) return true;  // a run from before the marker
  const fs::path summary = path(RunFile::Summary);
  try {
    return fs::exists(summary, error) && json::parse_file(summary.string()).find("config") != nullptr;
  } catch (const Error&) {
    return false;
  }
}

std::vector<std::string> RunFolder::written_files() const {
  std::vector<std::string> files;
  std::error_code error;
  for (const RunFileRow& row : kRunFiles) {
    if (row.file == RunFile::Marker || row.file == RunFile::Lock) continue;
    if (!row.prefix) {
      if (fs::exists(path(row.file), error)) files.emplace_back(row.name);
      continue;
    }
    for (const fs::directory_entry& entry : fs::directory_iterator(root_, error)) {
      if (is_run_file_name(entry.path().filename().string()) && entry.path().filename().string().starts_with(row.name)) {
        files.emplace_back("TensorBoard events");
        break;
      }
    }
  }
  return files;
}

void RunFolder::clear() const {
  std::error_code error;
  for (const fs::directory_entry& entry : fs::directory_iterator(root_, error)) {
    const std::string name = entry.path().filename().string();
    if (name == kRunFiles[static_cast<size_t>(RunFile::Marker)].name ||
        name == kRunFiles[static_cast<size_t>(RunFile::Lock)].name || !is_run_file_name(name))
      continue;
    if (name != kRunFiles[static_cast<size_t>(RunFile::Checkpoints)].name) {
      fs::remove(entry.path(), error);
      continue;
    }
    for (const std::string& checkpoint : checkpoints()) fs::remove(checkpoint, error);  // Kiln's names only
    fs::remove(entry.path(), error);  // the folder, when nothing else is in it
  }
}

void RunFolder::start_run(bool resuming, bool overwrite, const std::string& config_json,
                          const json::Value& identity) const {
  check_safe(root_);
  create();
  if (!is_kilns()) {  // Note [Only Kiln's files]: another's folder
    std::error_code error;
    for (const fs::directory_entry& entry : fs::directory_iterator(root_, error)) {
      const std::string name = entry.path().filename().string();
      if (name == kRunFiles[static_cast<size_t>(RunFile::Lock)].name) continue;
      KILN_CHECK(overwrite, "run folder ", root_, " holds files that are not a Kiln run's (", name,
                 "...); choose another --out, or give --overwrite to run there beside them");
      KILN_CHECK(!is_run_file_name(name), "run folder ", root_, " holds your ", name,
                 ", which a run would replace; move it, or choose another --out");
    }
  } else if (!resuming) {
    KILN_CHECK(!holds_run() || overwrite, "run folder ", root_,
               " already holds a run; continue it with --resume auto, replace it with --overwrite, or choose "
               "another --out");
    clear();  // a replaced run's files, or those of one that died before its first checkpoint
  }
  save_atomically(json::dump(json::Value::object({{"kiln_run", json::Value::integer(1)}, {"identity", identity}}), 2) + "\n",
                  path(RunFile::Marker), "kiln train");
  save_atomically(config_json, path(RunFile::Config), "kiln train");
}

}  // namespace kiln::train
