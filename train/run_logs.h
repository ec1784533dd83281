// RunLogs: everything a run tells people and programs while it trains, in one room:
//   the console  one line per epoch, the bottleneck tables, messages (rank 0 only)
//   progress     the progress line after every micro-batch (train/progress.h)
//   epochs.csv   one row per epoch; steps.csv one row per logged step (--csv-per-step)
//   TensorBoard  the epoch row's numbers and the running loss at each logged step, all
//                against the optimizer step (Note [Purging after a resume] in tensorboard.h)
//
// Note [One column list]: an epoch's numbers are an EpochRow, and epoch_fields() lists them
// as (column, value) in the one order everything uses: the CSV header is the names, a CSV
// row the values, TensorBoard's tags the names again, and the console line is written from
// the same list. The validation metrics are the task's (train/metrics.h): for
// classification, epochs.csv reads
//   epoch,lr,train/loss,train/acc,val/loss,val/auc,val/acc,seconds,samples_per_s,loss_scale
//
//   train::RunLogs logs(std::cout, terminal, config.epochs, {.running = "acc", .metrics = {"auc", "acc"}});
//   logs.open(run.folder, config, /*saved=*/nullptr);
//   logs.epoch(row);
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "core/json.h"
#include "train/config.h"
#include "train/csv_log.h"
#include "train/progress.h"
#include "train/run_folder.h"
#include "train/tensorboard.h"

namespace kiln::train {

inline constexpr double kNotMeasured = std::numeric_limits<double>::quiet_NaN();

// The fixed columns' names, and the prefixes of the metric columns ("val/auc", "train/acc"),
// for readers of the tables (train/plot.h).
namespace column {
inline constexpr const char* kEpoch = "epoch";
inline constexpr const char* kLr = "lr";
inline constexpr const char* kTrain = "train/";
inline constexpr const char* kVal = "val/";
inline constexpr const char* kLoss = "loss";  // train/loss, val/loss
}  // namespace column

// The task's metric names (train/metrics.h: validation_metric_names, running_metric_name).
struct LogColumns {
  std::string running;               // the training metric kept on the device: "acc"
  std::vector<std::string> metrics;  // the validation metrics: "auc", "acc"
};

struct EpochRow {
  int64_t epoch = 0;
  int64_t step = 0;  // optimizer steps done when it ended: TensorBoard's x (Note [Purging after a resume])
  double lr = kNotMeasured;
  double train_loss = kNotMeasured, train_running = kNotMeasured;
  double val_loss = kNotMeasured;
  std::vector<double> val_metrics = {};  // LogColumns::metrics' order; empty: not validated
  double seconds = 0, samples_per_s = 0, loss_scale = 1;
  bool best = false;  // the console line says "(best)"
};

class RunLogs {
 public:
  RunLogs(std::ostream& out, bool terminal, int64_t epochs, LogColumns columns);

  // Opens the run folder's files, continuing the tables a resumed checkpoint saved (`saved`:
  // its "logs" object, Note [Checkpoint layout]; null for a new run).
  // `saved`: a checkpoint's tables, resumed after its optimizer step `resumed_step`.
  void open(const RunFolder& folder, const TrainConfig& config, const json::Value* saved, int64_t resumed_step = 0);

  std::ostream& out() { return out_; }
  // The progress line (train/progress.h).
  void progress(const Progress& progress) { bar_.update(progress); }
  // A logged step: steps.csv and TensorBoard's "loss/train_running".
  void step(int64_t step, int64_t epoch, int64_t batch, double lr, double loss, double running);
  // An epoch: the console line, epochs.csv, TensorBoard.
  void epoch(const EpochRow& row);
  // Note [One column list].
  std::vector<std::pair<std::string, double>> epoch_fields(const EpochRow& row) const;
  // The tables saved now (each checkpoint does).
  void flush();
  // The tables for a checkpoint ({"epochs.csv": "...", "steps.csv": "..."}).
  json::Value state() const;

 private:
  std::vector<std::pair<std::string, double>> step_fields(int64_t step, int64_t epoch, int64_t batch, double lr,
                                                          double loss, double running) const;
  std::string console_line(const EpochRow& row) const;

  std::ostream& out_;
  int64_t epochs_;
  LogColumns columns_;
  ProgressBar bar_;
  std::unique_ptr<CsvLog> epochs_csv_, steps_csv_;
  std::unique_ptr<TensorBoardWriter> tensorboard_;
};

// Where a process that writes nothing prints: nowhere (ranks > 0 of a --ddp run).
std::ostream& null_stream();

}  // namespace kiln::train
