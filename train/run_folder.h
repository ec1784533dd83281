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
//
// kRunFiles is that list; the code that writes, finds or clears a file takes its name from
// the table, so no other file keeps a list of them.
//
//   train::RunFolder folder("runs/adrenal");
//   folder.path(train::RunFile::EpochsCsv);  // "runs/adrenal/epochs.csv"
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace kiln::train {

enum class RunFile : uint8_t { Config, Split, EpochsCsv, StepsCsv, Events, Checkpoints, BestWeights, FinalWeights, Summary };

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
  // Removes the files of kRunFiles (a replaced run's, or one that died before its first
  // checkpoint); anything else in the folder stays.
  void clear() const;
  // The folder made ready for a run: created; for a new run (not `resuming`) refused when
  // it holds one, unless `overwrite`, and cleared; `config_json` saved as config.json.
  void start_run(bool resuming, bool overwrite, const std::string& config_json) const;

 private:
  std::string root_;
};

}  // namespace kiln::train
