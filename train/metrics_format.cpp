// format_evaluation (train/metrics.h): an Evaluation as the lines `kiln eval` prints.
#include <cstdio>

#include "train/metrics.h"

namespace kiln::train {

std::string format_evaluation(const Evaluation& e, Task task) {
  std::string text;
  char line[160];
  if (task == Task::Regression) {
    std::snprintf(line, sizeof line, "MAE %.4f  RMSE %.4f  R2 %.4f  (%lld samples)\n", e.mae, e.rmse, e.r2,
                  static_cast<long long>(e.samples));
    return line;
  }
  std::snprintf(line, sizeof line, "ACC %.4f  AUC %.4f  (%lld samples)\n", e.acc, e.auc,
                static_cast<long long>(e.samples));
  text += line;
  if (e.per_class_auc.size() > 1) {
    text += task == Task::MultiLabel ? "AUC per label:" : "AUC per class:";
    for (size_t c = 0; c < e.per_class_auc.size(); ++c) {
      std::snprintf(line, sizeof line, " %zu: %.4f", c, e.per_class_auc[c]);
      text += line;
    }
    text += "\n";
  }
  if (!e.confusion.empty()) {
    text += "confusion matrix (rows: true class, columns: predicted)\n       ";
    for (size_t c = 0; c < e.confusion.size(); ++c) {
      std::snprintf(line, sizeof line, " %7zu", c);
      text += line;
    }
    text += "\n";
    for (size_t r = 0; r < e.confusion.size(); ++r) {
      std::snprintf(line, sizeof line, "  %5zu", r);
      text += line;
      for (const int64_t count : e.confusion[r]) {
        std::snprintf(line, sizeof line, " %7lld", static_cast<long long>(count));
        text += line;
      }
      text += "\n";
    }
  }
  if (task == Task::Binary) {
    std::snprintf(line, sizeof line, "sensitivity %.4f  specificity %.4f\n", e.sensitivity, e.specificity);
    text += line;
  }
  return text;
}

}  // namespace kiln::train
