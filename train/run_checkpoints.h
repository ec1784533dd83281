// RunCheckpoints: a run's checkpoints and best weights, as one room. It saves the run's
// state at each epoch's end (and every --checkpoint-every steps), prunes old checkpoints,
// keeps the best epoch's weights (a copy in memory and best.safetensors), writes
// final.safetensors, and resumes a run from a checkpoint: every owner's state restored,
// the best weights found again, a checkpoint's later siblings forgotten.
//
// What a checkpoint holds is Note [Checkpoint layout] (train/checkpoint.h); the owners of
// that state are the rooms of RunState below, and the loop's counters are RunProgress
// (train/run_progress.h).
//
//   train::RunCheckpoints checkpoints(run, monitor, model_info, logs.out());
//   std::optional<train::ResumePoint> from = checkpoints.prepare_resume();  // read and checked
//   ... the run folder started ...
//   if (from) progress = checkpoints.resume(std::move(*from), state);
//   checkpoints.save(state, progress);
#pragma once

#include <optional>
#include <ostream>
#include <string>

#include "core/json.h"
#include "nn/layer.h"
#include "train/checkpoint.h"
#include "train/optimization.h"
#include "train/run_context.h"
#include "train/run_logs.h"
#include "train/run_progress.h"
#include "train/running_sums.h"
#include "train/task.h"

namespace kiln::train {

// The metadata key of best.safetensors and final.safetensors holding the run's configuration
// (JSON), so `kiln eval --weights` rebuilds the model without being told what it is.
inline constexpr const char* kWeightsConfigKey = "kiln.config";
// ... what the model predicts: the task kind (train/task.h: "binary", "multi-class",
// "multi-label", "regression"), the outputs' names in order (a JSON array: the classes, the
// labels of a multi-label task, the targets of a regression) and the input channels.
inline constexpr const char* kWeightsTaskKey = "kiln.task";
inline constexpr const char* kWeightsClassesKey = "kiln.classes";
inline constexpr const char* kWeightsChannelsKey = "kiln.channels";

// The rooms whose state a checkpoint holds.
struct RunState {
  nn::Layer& model;
  Optimization& optimization;
  RunningSums& sums;
  RunLogs& logs;
};

// A checkpoint read and checked against the run, before anything of the run is written
// (a refused resume changes nothing).
struct ResumePoint {
  std::string path;
  CheckpointContents contents;
  RunProgress progress;
};

class RunCheckpoints {
 public:
  // `monitor`: the monitored metric's name, recorded with the best weights; `model`: what
  // the model predicts, recorded with the best and final weights.
  RunCheckpoints(const RunContext& run, std::string monitor, ModelInfo model, std::ostream& out);

  // The checkpoint --resume names: none, the file given, or (auto) the folder's latest.
  std::optional<std::string> to_resume() const;
  // That checkpoint read and checked: a checkpoint of another run (Note [Resuming a
  // different run]) or one taken mid-epoch by another number of ranks is an error.
  std::optional<ResumePoint> prepare_resume() const;
  // Restores every owner's state from the checkpoint and returns the progress it
  // recorded; opens the logs with the tables it saved.
  RunProgress resume(ResumePoint from, const RunState& state);
  // A checkpoint of the state now (rank 0), named by the progress (a mid-epoch one when
  // progress.batch > 0), then pruning to --keep-last and the best epoch's.
  void save(const RunState& state, const RunProgress& progress);

  // The model's weights now are the best epoch's: kept in memory and as best.safetensors.
  void keep_best(nn::Layer& model, int64_t epoch);
  // The best epoch's weights; empty before the first validation.
  const nn::StateDict& best() const { return best_; }
  // final.safetensors.
  void save_final(nn::Layer& model, int64_t epoch) const;

 private:
  void restore_best(const std::string& checkpoint, RunProgress& progress, nn::Layer& model);
  void forget_later(const std::string& checkpoint) const;
  void save_weights(nn::Layer& model, RunFile file, int64_t epoch) const;

  const RunContext& run_;
  std::string monitor_;
  ModelInfo model_;
  std::ostream& out_;
  nn::StateDict best_;
};

// A deep copy of a state dict (the best weights must not follow the training).
nn::StateDict clone_state(const nn::StateDict& state);

}  // namespace kiln::train
