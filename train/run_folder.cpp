// RunFolder (train/run_folder.h): paths from kRunFiles.
#include "train/run_folder.h"

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

void RunFolder::clear() const {
  std::error_code error;
  for (const fs::directory_entry& entry : fs::directory_iterator(root_, error)) {
    const std::string name = entry.path().filename().string();
    for (const RunFileRow& row : kRunFiles) {
      if (row.prefix ? name.starts_with(row.name) : name == row.name) fs::remove_all(entry.path(), error);
    }
  }
}

void RunFolder::start_run(bool resuming, bool overwrite, const std::string& config_json) const {
  create();
  if (!resuming) {
    KILN_CHECK(!holds_run() || overwrite, "run folder ", root_,
               " already holds a run; continue it with --resume auto, replace it with --overwrite, or choose "
               "another --out");
    clear();  // a replaced run's files, or those of one that died before its first checkpoint
  }
  save_atomically(config_json, path(RunFile::Config), "kiln train");
}

}  // namespace kiln::train
