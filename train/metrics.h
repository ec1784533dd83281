// MedMNIST's evaluator (medmnist/evaluator.py: getAUC, getACC), exactly, and what a
// researcher reads beside it: per-class AUC, the confusion matrix, sensitivity and
// specificity, and a decision threshold calibrated on the validation set.
//
//   task         scores y_score             AUC                           ACC
//   Binary       [N] or [N, 2] (last col)   roc_auc of the positive score  score > threshold (0.5)
//   MultiClass   [N, C] (probabilities)     mean of one-vs-rest AUCs       argmax (first on ties)
//   MultiLabel   [N, L]                     mean of the labels' AUCs       mean over labels of score >
//   threshold
// Labels y_true: [N] class indices (Binary, MultiClass) or [N, L] of 0/1 (MultiLabel).
//
// Note [AUC with ties]: roc_auc is the probability that a random positive scores above a
// random negative, a tie counting one half (the Mann-Whitney U statistic over n_pos n_neg):
// exactly the area under scikit-learn's ROC curve, whose ties are diagonal segments. It is
// computed from average ranks in O(N log N). With only one class present it is undefined:
// NaN here (scikit-learn raises), so an evaluation never stops a training run.
//
// Youden's J: the threshold t maximising sensitivity + specificity - 1 over the distinct
// scores (score >= t is positive, as scikit-learn's roc_curve), the highest on ties. On a
// small, imbalanced validation set the epoch with the best AUC may put everything above
// 0.5; ACC at the calibrated threshold shows what the model separates.
//
//   const Evaluation e = evaluate(Task::MultiClass, labels, probabilities);
//   std::printf("ACC %.3f AUC %.3f\n", e.acc, e.auc);
#pragma once

#include <cstdint>
#include <limits>
#include <string_view>
#include <vector>

#include "core/tensor.h"

namespace kiln::train {

// Regression (one's own scans, --task regression) has its own metrics: train/regression.h.
enum class Task { Binary, MultiClass, MultiLabel, Regression };

// MedMNIST's task names ("binary-class", "multi-class", "multi-label, binary-class",
// "ordinal-regression" as multi-class, as its evaluator treats it).
Task parse_task(std::string_view medmnist_name);

// Note [AUC with ties]; labels 0/1. NaN when only one class is present.
double roc_auc(const std::vector<int64_t>& labels, const std::vector<double>& scores);
// Youden's J threshold of a binary score; NaN when only one class is present.
double youden_threshold(const std::vector<int64_t>& labels, const std::vector<double>& scores);

struct Evaluation {
  double auc = 0;                               // MedMNIST's AUC
  double acc = 0;                               // MedMNIST's ACC at `threshold`
  std::vector<double> per_class_auc;            // one-vs-rest per class, or per label; binary: 1
  std::vector<std::vector<int64_t>> confusion;  // [true][predicted]; MultiLabel: empty
  double sensitivity = 0, specificity = 0;      // Binary only: at `threshold` (score > threshold)
  int64_t samples = 0;
  // Regression only (train/regression.h); NaN for the other tasks, whose auc and acc a
  // regression leaves NaN.
  double mae = std::numeric_limits<double>::quiet_NaN();
  double rmse = std::numeric_limits<double>::quiet_NaN();
  double r2 = std::numeric_limits<double>::quiet_NaN();
};

// Regression: y_score are the predictions, [N, T] as y_true.
Evaluation evaluate(Task task, const Tensor& y_true, const Tensor& y_score, double threshold = 0.5);

// For people (metrics_format.cpp): ACC and AUC, the per-class AUCs, the confusion matrix
// (rows: true class, columns: predicted) and, for binary tasks, sensitivity and specificity.
std::string format_evaluation(const Evaluation& evaluation, Task task);

// Binary: the positive class's score and the 0/1 labels as vectors (y_score [N] or [N, 2]).
std::vector<double> positive_scores(const Tensor& y_score);
std::vector<int64_t> label_vector(const Tensor& y_true);

// Binary: ACC with `score >= threshold` positive (the calibrated threshold's convention).
double accuracy_at(const std::vector<int64_t>& labels, const std::vector<double>& scores, double threshold);

}  // namespace kiln::train
