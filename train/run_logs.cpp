// RunLogs (train/run_logs.h): the rows as (column, value) lists, written to each log.
#include "train/run_logs.h"

#include <cmath>
#include <cstdio>

namespace kiln::train {
namespace {

std::vector<std::string> names_of(const std::vector<std::pair<std::string, double>>& fields) {
  std::vector<std::string> names;
  for (const auto& [name, value] : fields) names.push_back(name);
  return names;
}

std::string four_places(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.4f", value);
  return text;
}

}  // namespace

std::ostream& null_stream() {
  static std::ostream discard(nullptr);
  return discard;
}

RunLogs::RunLogs(std::ostream& out, bool terminal, int64_t epochs, LogColumns columns)
    : out_(out), epochs_(epochs), columns_(std::move(columns)), bar_(out, terminal) {}

void RunLogs::open(const RunFolder& folder, const TrainConfig& config, const json::Value* saved,
                   int64_t resumed_step) {
  EpochRow header;
  header.val_metrics.assign(columns_.metrics.size(), kNotMeasured);
  epochs_csv_ = std::make_unique<CsvLog>(folder.path(RunFile::EpochsCsv), names_of(epoch_fields(header)));
  if (config.csv_per_step)
    steps_csv_ = std::make_unique<CsvLog>(folder.path(RunFile::StepsCsv), names_of(step_fields(0, 0, 0, 0, 0, 0)));
  if (saved != nullptr) {
    if (const json::Value* text = saved->find("epochs.csv")) epochs_csv_->restore(text->as_string());
    if (const json::Value* text = saved->find("steps.csv"); text && steps_csv_) steps_csv_->restore(text->as_string());
  }
  if (config.tensorboard) {
    tensorboard_ = std::make_unique<TensorBoardWriter>(folder.path(RunFile::Events));
    if (saved != nullptr) tensorboard_->purge_from(resumed_step + 1);  // Note [Purging after a resume]
  }
}

std::vector<std::pair<std::string, double>> RunLogs::step_fields(int64_t step, int64_t epoch, int64_t batch,
                                                                 double lr, double loss, double running) const {
  return {{"step", static_cast<double>(step)},
          {column::kEpoch, static_cast<double>(epoch)},
          {"batch", static_cast<double>(batch)},
          {column::kLr, lr},
          {std::string(column::kTrain) + column::kLoss, loss},
          {column::kTrain + columns_.running, running}};
}

void RunLogs::step(int64_t step, int64_t epoch, int64_t batch, double lr, double loss, double running) {
  if (steps_csv_) steps_csv_->add_row(step_fields(step, epoch, batch, lr, loss, running));
  if (tensorboard_) tensorboard_->add_scalar("loss/train_running", loss, step);
}

std::vector<std::pair<std::string, double>> RunLogs::epoch_fields(const EpochRow& row) const {
  std::vector<std::pair<std::string, double>> fields = {{column::kEpoch, static_cast<double>(row.epoch)},
                                                        {column::kLr, row.lr},
                                                        {std::string(column::kTrain) + column::kLoss, row.train_loss},
                                                        {column::kTrain + columns_.running, row.train_running},
                                                        {std::string(column::kVal) + column::kLoss, row.val_loss}};
  for (size_t m = 0; m < columns_.metrics.size(); ++m)
    fields.emplace_back(column::kVal + columns_.metrics[m], m < row.val_metrics.size() ? row.val_metrics[m] : kNotMeasured);
  fields.insert(fields.end(),
                {{"seconds", row.seconds}, {"samples_per_s", row.samples_per_s}, {"loss_scale", row.loss_scale}});
  return fields;
}

// "epoch 3/10  train loss 0.6012 acc 0.7000  val loss 0.5871 auc 0.8123 acc 0.7500  1.2 s  410.3 samples/s  (best)"
std::string RunLogs::console_line(const EpochRow& row) const {
  std::string line = "epoch " + std::to_string(row.epoch) + "/" + std::to_string(epochs_) + "  train loss " +
                     four_places(row.train_loss) + " " + columns_.running + " " + four_places(row.train_running) +
                     "  val loss " + four_places(row.val_loss);
  for (size_t m = 0; m < columns_.metrics.size(); ++m)
    line += " " + columns_.metrics[m] + " " + four_places(m < row.val_metrics.size() ? row.val_metrics[m] : kNotMeasured);
  char tail[96];
  std::snprintf(tail, sizeof tail, "  %.1f s  %.1f samples/s%s\n", row.seconds, row.samples_per_s,
                row.best ? "  (best)" : "");
  return line + tail;
}

void RunLogs::epoch(const EpochRow& row) {
  out_ << console_line(row);
  const std::vector<std::pair<std::string, double>> fields = epoch_fields(row);
  if (epochs_csv_) epochs_csv_->add_row(fields);
  if (tensorboard_) {
    for (const auto& [name, value] : fields) {
      if (std::isfinite(value)) tensorboard_->add_scalar(name, value, row.step);  // "epoch" too, against the step
    }
    tensorboard_->flush();
  }
}

void RunLogs::flush() {
  if (epochs_csv_) epochs_csv_->flush();
  if (steps_csv_) steps_csv_->flush();
}

json::Value RunLogs::state() const {
  json::Value logs = json::Value::object();
  if (epochs_csv_) logs.add("epochs.csv", json::Value::string(epochs_csv_->text()));
  if (steps_csv_) logs.add("steps.csv", json::Value::string(steps_csv_->text()));
  return logs;
}

}  // namespace kiln::train
