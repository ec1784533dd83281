// Trainer: the training loop of `kiln train`, as a library. Epochs of training and
// validation, the best model kept by a validation metric, early stopping, the test split
// at the end evaluated with the best and the final weights side by side; every speed
// technique of the guides a setting of TrainConfig; logs, checkpoints with exact resume,
// and the bottleneck report.
//
//   train::RunContext run = train::resolve_run(config);          // validated, joined, resolved once
//   train::TrainData data = train::make_train_data(config);     // or your own datasets
//   train::ModelSetup setup = train::make_model(config, data);  // or your own model
//   train::Trainer trainer(std::move(run), data, setup.model);
//   const train::RunSummary summary = trainer.fit();
//
// The rooms a run is made of, each its own file: the context (run_context.h), the batches
// (data_setup.h), the objective (objective.h), the optimization (optimization.h: optimizer,
// mixed precision, clipping, schedule), the running sums (running_sums.h), the progress
// (run_progress.h), the checkpoints and best weights (run_checkpoints.h), the logs
// (run_logs.h) and the folder (run_folder.h), set up together as Trainer::State
// (run_state.h). trainer.cpp is the loop over them: epochs, steps, validation, the test.
//
// Note [A training step]: for each micro-batch, in TimeRanges named after the report's
// phases (train/bottleneck.h):
//   data      the next batch (waiting for the loader; the prefetcher queues its copies)
//   copy      without device prefetching, the batch's copies to the GPU
//   forward   the forward pass and the loss, under the run's autocast
//   backward  (loss / accumulate x scale).backward()
//   optimizer every `accumulate` micro-batches (and at an epoch's end): unscale, clip,
//             the scaler's step (skipped on the device after an overflow), its update,
//             gradients to None, a per-batch scheduler's step
// The running loss and accuracy are sums on the device, read once per log interval
// (log-every), and so are the GPU's index bound checks (Note [Deferred index checks] in
// core/deferred_check.h): that read is the only host-device synchronisation of the loop,
// and the steps between two reads make none (RunSummary::quiet_step_syncs counts them; a
// test holds it at 0). One exception: with --sync-bn each batch-norm layer reads its
// ranks' sample counts once per forward (dist/sync_batch_norm.h).
//
// Note [Best and final]: MedMNIST's script keeps a reference to the model as "the best"
// and so reports the final epoch's test metrics as the best epoch's. Here the best
// weights are a copy (and best.safetensors), and the test split is evaluated twice: with
// the final weights and with the best. For binary tasks a threshold calibrated on the
// validation set (Youden's J, with the best weights) is reported with the test ACC at it,
// beside the ACC at 0.5.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "core/json.h"
#include "nn/layer.h"
#include "train/bottleneck.h"
#include "train/config.h"
#include "train/data_setup.h"
#include "train/metrics.h"
#include "train/run_checkpoints.h"
#include "train/run_context.h"

namespace kiln::train {

struct TestResult {
  std::string weights;   // "best" or "final"
  int64_t epoch = 0;     // the epoch the weights are from
  Evaluation metrics;    // at 0.5
  double threshold = 0;  // Youden's J on the validation set (binary tasks; NaN otherwise)
  double acc_at_threshold = 0;
};

struct RunSummary {
  std::string run_dir;
  std::string monitor;  // the validation metric that chose the best epoch (train/task.h)
  std::vector<std::string> classes;  // the outputs' names, in order (TrainData::class_names)
  Task task = Task::MultiClass;      // what the test results are (regression: MAE, RMSE, R2)
  std::vector<std::string> files;    // what the run folder holds at the end (RunFolder::written_files)
  std::string stopped;  // "completed", "early stopping", "profile", "signal"
  int stopped_by = 0;   // the signal that stopped the run (train/stop_signals.h), or 0
  int64_t epochs = 0;   // epochs completed
  int64_t steps = 0;    // optimizer steps
  int64_t best_epoch = 0;
  double best_metric = 0;        // the monitored validation metric at best_epoch (NaN: never validated)
  std::vector<TestResult> test;  // best, then final (Note [Best and final])
  double train_seconds = 0;      // the training epochs' wall time (validation included)
  double samples_per_s = 0;      // training samples per second of training phases
  BottleneckReport report;       // over the whole run (or the profiled steps)
  int64_t quiet_steps = 0;       // micro-batches that did not log
  int64_t quiet_step_syncs = 0;  // host syncs made inside them (Note [A training step])
};

// The summary as JSON (summary.json): the configuration, the result, the time per phase.
json::Value to_json(const RunSummary& summary, const TrainConfig& config);
// The end-of-run lines: best epoch, test metrics side by side, where the logs are.
std::string format_summary(const RunSummary& summary);

struct TrainerOutput {
  std::ostream* out = nullptr;  // null: std::cout
  bool terminal = false;        // redraw the progress line in place
};

class Trainer {
 public:
  // `model` is on the CPU or already on the run's device, in float32.
  Trainer(RunContext run, TrainData data, std::shared_ptr<nn::Layer> model, TrainerOutput output = {});
  // The same with the context resolved here (resolve_run).
  Trainer(TrainConfig config, TrainData data, std::shared_ptr<nn::Layer> model, TrainerOutput output = {});
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  // Trains (or resumes, with config.resume), tests, writes summary.json; returns the summary.
  RunSummary fit();

  nn::Layer& model();
  Device device() const;
  const std::string& run_dir() const;

  // The run's rooms (trainer.cpp); declared here so that the loop's functions can take it.
  struct State;

 private:
  std::unique_ptr<State> state_;
};

}  // namespace kiln::train
