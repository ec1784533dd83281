// RunFolder: every path of a run folder, in one place. What `kiln train` writes there:
//
//   config.json          the resolved configuration (train/config.h)
//   split.csv            one's own scans: which file is in which split (train/scans.h)
//   epochs.csv           one row per epoch (train/run_logs.h)
//   steps.csv            one row per logged step (--csv-per-step)
//   events.out.tfevents.*  TensorBoard's scalars
//   checkpoints/         epoch-0003.safetensors, epoch-0003-batch-000120.safetensors (train/checkpoint.h)
//   best.safetensors     the best epoch's weights; final.safetensors, the last epoch's
//   summary.json         the result (train/trainer.h)
//   .kiln-run.json       the marker: this folder is a Kiln run's, and which run (its identity)
//   .kiln-run.lock       held while a trainer runs in it (train/run_lock.h)
//
// kRunFiles is that list; the code that writes, finds or clears a file takes its name from
// the table, so no other file keeps a list of them.
//
// Note [Only Kiln's files]: Kiln deletes only files it wrote and can recognise as its own:
// in a folder holding its marker, the files of kRunFiles, the checkpoints it names
// (epoch-*.safetensors, nothing else under checkpoints/) and the event files its writer
// names (events.out.tfevents.*.kiln). A folder that holds anything else is refused for a
// new run unless --overwrite; with --overwrite the other files stay, and one whose name a
// run file would take is refused, naming it. The file system's root, the home folder and
// the current folder are never run folders. (A folder of a run from before the marker is
// recognised by its Kiln checkpoints or summary.json, and marked.)
//
//   train::RunFolder folder("runs/adrenal");
//   folder.path(train::RunFile::EpochsCsv);  // "runs/adrenal/epochs.csv"
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/json.h"

namespace kiln::train {

enum class RunFile : uint8_t {
  Config, Split, EpochsCsv, StepsCsv, Events, Checkpoints, BestWeights, FinalWeights, Summary, Marker, Lock
};

struct RunFileRow {
  RunFile file;      // row i describes enumerator i
  const char* name;  // the file's name; for Events, the prefix of the writer's file names
  bool prefix;       // names starting with `name` (TensorBoard adds the time, host and pid)
};

inline constexpr RunFileRow kRunFiles[] = {
    {RunFile::Config, "config.json", false},
    {RunFile::Split, "split.csv", false},
    {RunFile::EpochsCsv, "epochs.csv", false},
    {RunFile::StepsCsv, "steps.csv", false},
    {RunFile::Events, "events.out.tfevents.", true},
    {RunFile::Checkpoints, "checkpoints", false},
    {RunFile::BestWeights, "best.safetensors", false},
    {RunFile::FinalWeights, "final.safetensors", false},
    {RunFile::Summary, "summary.json", false},
    {RunFile::Marker, ".kiln-run.json", false},
    {RunFile::Lock, ".kiln-run.lock", false},
};

constexpr bool run_files_in_order() {
  for (size_t i = 0; i < std::size(kRunFiles); ++i) {
    if (static_cast<size_t>(kRunFiles[i].file) != i) return false;
  }
  return true;
}
static_assert(run_files_in_order(), "kRunFiles rows must follow the RunFile order");

class RunFolder {
 public:
  explicit RunFolder(std::string root) : root_(std::move(root)) {}

  const std::string& root() const { return root_; }
  // The file's path (for Events: the folder, where TensorBoardWriter names its file).
  std::string path(RunFile file) const;
  // A checkpoint's path: checkpoints/<checkpoint_name(epoch, batch)>.
  std::string checkpoint(int64_t epoch, int64_t batch) const;
  // The folder's checkpoints, oldest first.
  std::vector<std::string> checkpoints() const;

  // Whether the folder holds a run: its checkpoints or its summary. A folder whose run died
  // before its first checkpoint holds nothing to continue.
  bool holds_run() const;
  // Creates the folder (and its parents); an error names it.
  void create() const;
  // Removes Kiln's own files (Note [Only Kiln's files]: a replaced run's, or one that died
  // before its first checkpoint); anything else in the folder stays.
  void clear() const;
  // The folder made ready for a run (Note [Only Kiln's files]): created; an unsafe folder,
  // or one holding other files without `overwrite`, refused; for a new run (not
  // `resuming`) refused when it holds a run, unless `overwrite`, and Kiln's files cleared;
  // then marked (`identity`: the run's identity fields) and `config_json` saved as
  // config.json. The caller holds the folder's RunLock.
  void start_run(bool resuming, bool overwrite, const std::string& config_json, const json::Value& identity) const;
  // Whether the folder carries Kiln's marker, or is a run folder from before it.
  bool is_kilns() const;
  // The run's files the folder holds now, by name, in the table's order ("TensorBoard
  // events" for the event files), the marker and the lock left out: what a summary lists.
  std::vector<std::string> written_files() const;

 private:
  std::string root_;
};

}  // namespace kiln::train
