// What a task measures: the validation metrics a run logs for it and may monitor, the
// metric kept on the device while training, the direction of each, and what --monitor
// auto means. Metrics are named by the Monitor choice (train/choices.h), so a metric, its
// column in epochs.csv ("val/auc") and its --monitor value are one name.
//
//   task        validation metrics   running metric   --monitor auto
//   binary      auc, acc             acc              auc
//   multi-class auc, acc             acc              auc
//   multi-label auc, acc             acc              auc
//   regression  mae, rmse, r2        mae              rmse
#pragma once

#include <string>
#include <vector>

#include "train/choices.h"
#include "train/metrics.h"

namespace kiln::train {

// The task kinds' names, as a trained model's weights record them ("kiln.task").
inline constexpr ChoiceRow<Task> kTaskKindRows[] = {{Task::Binary, "binary"},
                                                    {Task::MultiClass, "multi-class"},
                                                    {Task::MultiLabel, "multi-label"},
                                                    {Task::Regression, "regression"}};
static_assert(valid_choice_rows(kTaskKindRows));
constexpr ChoiceTable<Task> choice_table(Task) { return {"task kind", kTaskKindRows}; }

// What a trained model takes and gives, recorded with its weights (train/run_checkpoints.h)
// so that `kiln predict` rebuilds and reads it from the weights alone.
struct ModelInfo {
  Task task = Task::MultiClass;
  int64_t classes = 0;   // classes, labels or regression targets
  int64_t channels = 1;  // input channels
  std::vector<std::string> class_names = {};  // the outputs' names, in order (may be empty)
};

std::vector<Monitor> validation_metrics(Task task);
Monitor running_metric(Task task);
// The metric names, for the logs' columns (train/run_logs.h).
std::vector<std::string> metric_names(const std::vector<Monitor>& metrics);

// --monitor for `task`: auto resolved; loss or one of the task's validation metrics, else
// an error listing them.
Monitor resolved_monitor(Monitor monitor, Task task);
// auc, acc (and r2) grow as the model improves; loss (and mae, rmse) fall.
bool higher_is_better(Monitor metric);

}  // namespace kiln::train
