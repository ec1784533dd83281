// The task's metric vocabulary (train/task.h).
#include "train/task.h"

#include <algorithm>

#include "core/error.h"
#include "core/text_list.h"

namespace kiln::train {

std::vector<Monitor> validation_metrics(Task task) {
  if (task == Task::Regression) return {Monitor::Mae, Monitor::Rmse, Monitor::R2};
  return {Monitor::Auc, Monitor::Acc};
}

Monitor running_metric(Task task) { return task == Task::Regression ? Monitor::Mae : Monitor::Acc; }

std::vector<std::string> metric_names(const std::vector<Monitor>& metrics) {
  std::vector<std::string> names;
  for (const Monitor metric : metrics) names.emplace_back(choice_name(metric));
  return names;
}

Monitor resolved_monitor(Monitor monitor, Task task) {
  if (monitor == Monitor::Auto) return task == Task::Regression ? Monitor::Rmse : Monitor::Auc;
  const std::vector<Monitor> metrics = validation_metrics(task);
  std::vector<std::string> valid = metric_names(metrics);
  valid.emplace_back("loss");
  KILN_CHECK(monitor == Monitor::Loss || std::find(metrics.begin(), metrics.end(), monitor) != metrics.end(),
             "config: monitor ", choice_name(monitor), " is not a metric of this task (", joined(valid), ")");
  return monitor;
}

bool higher_is_better(Monitor metric) {
  switch (metric) {
    case Monitor::Auc:
    case Monitor::Acc:
    case Monitor::R2:
    case Monitor::Auto: return true;
    case Monitor::Loss:
    case Monitor::Mae:
    case Monitor::Rmse: return false;
  }
  return true;
}

}  // namespace kiln::train
