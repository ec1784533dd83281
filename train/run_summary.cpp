// RunSummary's JSON (summary.json) and end-of-run text (train/trainer.h). NaN (a metric that
// is undefined, such as an AUC with one class) is JSON null.
#include <cmath>
#include <sstream>

#include "core/text_list.h"
#include "train/trainer.h"

namespace kiln::train {
namespace {

json::Value number_or_null(double value) {
  return std::isfinite(value) ? json::Value::number(value) : json::Value();
}

json::Value to_json(const Evaluation& e) {
  json::Value per_class = json::Value::array();
  for (const double auc : e.per_class_auc) per_class.push_back(number_or_null(auc));
  json::Value confusion = json::Value::array();
  for (const std::vector<int64_t>& row : e.confusion) {
    json::Value cells = json::Value::array();
    for (const int64_t count : row) cells.push_back(json::Value::integer(count));
    confusion.push_back(std::move(cells));
  }
  json::Value object = json::Value::object({{"auc", number_or_null(e.auc)},
                                            {"acc", number_or_null(e.acc)},
                                            {"per_class_auc", std::move(per_class)},
                                            {"confusion", std::move(confusion)},
                                            {"sensitivity", number_or_null(e.sensitivity)},
                                            {"specificity", number_or_null(e.specificity)},
                                            {"samples", json::Value::integer(e.samples)}});
  if (!std::isnan(e.mae)) {  // a regression's (train/regression.h)
    object.add("mae", number_or_null(e.mae));
    object.add("rmse", number_or_null(e.rmse));
    object.add("r2", number_or_null(e.r2));
  }
  return object;
}

json::Value to_json(const BottleneckReport& report) {
  json::Value phases = json::Value::object();
  for (const PhaseTime& p : report.phases) {
    phases.add(
        p.phase,
        json::Value::object(
            {{"seconds", json::Value::number(p.seconds)},
             {"fraction", json::Value::number(p.fraction)},
             {"device_seconds", p.device_seconds ? json::Value::number(*p.device_seconds) : json::Value()}}));
  }
  return json::Value::object({{"wall_seconds", json::Value::number(report.wall_seconds)},
                              {"batches", json::Value::integer(report.batches)},
                              {"phases", std::move(phases)},
                              {"host_syncs_per_batch", json::Value::number(report.host_syncs_per_batch)},
                              {"diagnosis", json::Value::string(report.diagnosis)}});
}

}  // namespace

json::Value to_json(const RunSummary& summary, const TrainConfig& config) {
  json::Value test = json::Value::array();
  for (const TestResult& result : summary.test) {
    test.push_back(json::Value::object({{"weights", json::Value::string(result.weights)},
                                        {"epoch", json::Value::integer(result.epoch)},
                                        {"metrics", to_json(result.metrics)},
                                        {"threshold", number_or_null(result.threshold)},
                                        {"acc_at_threshold", number_or_null(result.acc_at_threshold)}}));
  }
  json::Value classes = json::Value::array();
  for (const std::string& name : summary.classes) classes.push_back(json::Value::string(name));
  return json::Value::object({{"config", to_json(config)},
                              {"run_dir", json::Value::string(summary.run_dir)},
                              {"classes", std::move(classes)},
                              {"stopped", json::Value::string(summary.stopped)},
                              {"epochs", json::Value::integer(summary.epochs)},
                              {"steps", json::Value::integer(summary.steps)},
                              {"best_epoch", json::Value::integer(summary.best_epoch)},
                              {"best_val_" + summary.monitor, number_or_null(summary.best_metric)},
                              {"test", std::move(test)},
                              {"train_seconds", json::Value::number(summary.train_seconds)},
                              {"samples_per_s", json::Value::number(summary.samples_per_s)},
                              {"time", to_json(summary.report)},
                              {"quiet_step_host_syncs", json::Value::integer(summary.quiet_step_syncs)}});
}

std::string format_summary(const RunSummary& summary) {
  std::ostringstream out;
  char line[256];
  std::snprintf(
      line, sizeof line, "%s after %lld epochs (%lld steps, %.1f s, %.1f samples/s); best epoch %lld\n",
      summary.stopped.c_str(), static_cast<long long>(summary.epochs), static_cast<long long>(summary.steps),
      summary.train_seconds, summary.samples_per_s, static_cast<long long>(summary.best_epoch));
  out << line;
  if (summary.task == Task::Regression && !summary.test.empty()) {
    out << "test        epoch    MAE        RMSE       R2\n";
    for (const TestResult& r : summary.test) {
      std::snprintf(line, sizeof line, "  %-9s %5lld   %-9.4g  %-9.4g  %.4f\n", r.weights.c_str(),
                    static_cast<long long>(r.epoch), r.metrics.mae, r.metrics.rmse, r.metrics.r2);
      out << line;
    }
  } else if (!summary.test.empty()) {
    out << "test        epoch    ACC      AUC      threshold  ACC at threshold\n";
    for (const TestResult& r : summary.test) {
      std::snprintf(line, sizeof line, "  %-9s %5lld   %.4f   %.4f", r.weights.c_str(), static_cast<long long>(r.epoch),
                    r.metrics.acc, r.metrics.auc);
      out << line;
      if (std::isnan(r.threshold)) {
        out << "   -          -\n";  // not a binary task
      } else {
        std::snprintf(line, sizeof line, "   %9.4f  %.4f\n", r.threshold, r.acc_at_threshold);
        out << line;
      }
    }
  }
  out << "logs: " << summary.run_dir << (summary.files.empty() ? "" : " (" + joined(summary.files) + ")") << "\n";
  return out.str();
}

}  // namespace kiln::train
