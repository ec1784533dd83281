// MedMNIST's metrics (metrics.h): AUC from average ranks (Note [AUC with ties]), ACC,
// confusion matrices and Youden's threshold, on host copies of the labels and scores.
#include "train/metrics.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>

#include "core/error.h"
#include "train/regression.h"

namespace kiln::train {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// The tensor's values as doubles, row-major, on the host.
std::vector<double> host_values(const Tensor& t) {
  return t.to(Device::cpu(), DType::Float64).contiguous().to_vector<double>();
}

void check_labels(const std::vector<int64_t>& labels, const std::vector<double>& scores, const char* op) {
  KILN_CHECK(labels.size() == scores.size(), op, ": ", labels.size(), " labels for ", scores.size(),
             " scores");
  for (const int64_t label : labels)
    KILN_CHECK(label == 0 || label == 1, op, ": a binary label is ", label, ", not 0 or 1");
  for (const double s : scores) KILN_CHECK(!std::isnan(s), op, ": a score is NaN");
}

}  // namespace

Task parse_task(std::string_view name) {
  if (name == "binary-class") return Task::Binary;
  if (name == "multi-class" || name == "ordinal-regression") return Task::MultiClass;
  if (name == "multi-label, binary-class") return Task::MultiLabel;
  KILN_CHECK(false, "metrics: unknown task '", std::string(name),
             "' (binary-class, multi-class, ordinal-regression, multi-label, binary-class)");
  return Task::Binary;
}

double roc_auc(const std::vector<int64_t>& labels, const std::vector<double>& scores) {
  check_labels(labels, scores, "roc_auc");
  const size_t n = scores.size();
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return scores[a] < scores[b]; });
  // Average ranks (1-based) over runs of equal scores; the positives' rank sum gives U.
  double positive_rank_sum = 0;
  int64_t positives = 0;
  for (size_t i = 0; i < n;) {
    size_t j = i;
    while (j + 1 < n && scores[order[j + 1]] == scores[order[i]]) ++j;
    const double average_rank = (static_cast<double>(i + 1) + static_cast<double>(j + 1)) / 2.0;
    for (size_t k = i; k <= j; ++k) {
      if (labels[order[k]] != 1) continue;
      positive_rank_sum += average_rank;
      ++positives;
    }
    i = j + 1;
  }
  const int64_t negatives = static_cast<int64_t>(n) - positives;
  if (positives == 0 || negatives == 0) return kNaN;
  const double p = static_cast<double>(positives);
  return (positive_rank_sum - p * (p + 1) / 2.0) / (p * static_cast<double>(negatives));
}

double youden_threshold(const std::vector<int64_t>& labels, const std::vector<double>& scores) {
  check_labels(labels, scores, "youden_threshold");
  const auto positives = static_cast<int64_t>(std::count(labels.begin(), labels.end(), int64_t{1}));
  const int64_t negatives = static_cast<int64_t>(labels.size()) - positives;
  if (positives == 0 || negatives == 0) return kNaN;
  std::vector<size_t> order(scores.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return scores[a] > scores[b]; });
  // Walk the thresholds from the highest score down: at t = a distinct score, everything
  // scoring >= t is positive.
  int64_t true_positives = 0, false_positives = 0;
  double best_j = -std::numeric_limits<double>::infinity(), best = kNaN;
  for (size_t i = 0; i < order.size();) {
    const double t = scores[order[i]];
    for (; i < order.size() && scores[order[i]] == t; ++i) {
      if (labels[order[i]] == 1)
        ++true_positives;
      else
        ++false_positives;
    }
    const double j = static_cast<double>(true_positives) / static_cast<double>(positives) -
                     static_cast<double>(false_positives) / static_cast<double>(negatives);
    if (j > best_j) {
      best_j = j;
      best = t;
    }
  }
  return best;
}

double accuracy_at(const std::vector<int64_t>& labels, const std::vector<double>& scores, double threshold) {
  check_labels(labels, scores, "accuracy_at");
  if (labels.empty()) return kNaN;
  int64_t right = 0;
  for (size_t i = 0; i < labels.size(); ++i) right += (scores[i] >= threshold ? 1 : 0) == labels[i] ? 1 : 0;
  return static_cast<double>(right) / static_cast<double>(labels.size());
}

std::vector<double> positive_scores(const Tensor& y_score) {
  KILN_CHECK(y_score.dim() == 1 || (y_score.dim() == 2 && y_score.size(1) == 2),
             "metrics: binary scores must be [N] or [N, 2], got ", y_score.sizes());
  return host_values(y_score.dim() == 1 ? y_score : y_score.select(1, 1));
}

std::vector<int64_t> label_vector(const Tensor& y_true) {
  const std::vector<double> values = host_values(y_true.reshape({-1}));
  std::vector<int64_t> labels;
  for (const double v : values) {
    KILN_CHECK(v == std::floor(v) && v >= 0, "metrics: a label is ", v, ", not a class index");
    labels.push_back(static_cast<int64_t>(v));
  }
  return labels;
}

Evaluation evaluate(Task task, const Tensor& y_true, const Tensor& y_score, double threshold) {
  Evaluation e;
  KILN_CHECK(y_true.defined() && y_score.defined(), "metrics: undefined labels or scores");
  e.samples = y_score.dim() == 0 ? 0 : y_score.size(0);
  KILN_CHECK(y_true.dim() >= 1 && y_true.size(0) == e.samples, "metrics: ", y_true.sizes(), " labels for ",
             y_score.sizes(), " scores");
  if (task == Task::Regression) {
    const RegressionMetrics m = regression_metrics(y_true, y_score);
    e.auc = e.acc = e.sensitivity = e.specificity = kNaN;
    e.mae = m.mae;
    e.rmse = m.rmse;
    e.r2 = m.r2;
    return e;
  }
  if (task == Task::Binary) {
    const std::vector<int64_t> labels = label_vector(y_true);
    const std::vector<double> scores = positive_scores(y_score);
    e.auc = roc_auc(labels, scores);
    e.per_class_auc = {e.auc};
    e.confusion.assign(2, std::vector<int64_t>(2, 0));
    int64_t right = 0;
    for (size_t i = 0; i < labels.size(); ++i) {
      const int64_t predicted = scores[i] > threshold ? 1 : 0;  // MedMNIST's strict >
      ++e.confusion[static_cast<size_t>(labels[i])][static_cast<size_t>(predicted)];
      right += predicted == labels[i] ? 1 : 0;
    }
    e.acc = labels.empty() ? kNaN : static_cast<double>(right) / static_cast<double>(labels.size());
    const double tp = static_cast<double>(e.confusion[1][1]), fn = static_cast<double>(e.confusion[1][0]);
    const double tn = static_cast<double>(e.confusion[0][0]), fp = static_cast<double>(e.confusion[0][1]);
    e.sensitivity = tp + fn > 0 ? tp / (tp + fn) : kNaN;
    e.specificity = tn + fp > 0 ? tn / (tn + fp) : kNaN;
    return e;
  }
  KILN_CHECK(y_score.dim() == 2, "metrics: scores must be [N, C], got ", y_score.sizes());
  const auto columns = static_cast<size_t>(y_score.size(1));
  const std::vector<double> scores = host_values(y_score);
  const auto score = [&](size_t row, size_t column) { return scores[row * columns + column]; };
  const auto rows = static_cast<size_t>(e.samples);
  if (task == Task::MultiClass) {
    const std::vector<int64_t> labels = label_vector(y_true);
    e.confusion.assign(columns, std::vector<int64_t>(columns, 0));
    int64_t right = 0;
    for (size_t i = 0; i < rows; ++i) {
      KILN_CHECK(static_cast<size_t>(labels[i]) < columns, "metrics: label ", labels[i], " of ", columns,
                 " classes");
      size_t predicted = 0;
      for (size_t c = 1; c < columns; ++c)
        if (score(i, c) > score(i, predicted)) predicted = c;  // the first maximum, as numpy's argmax
      ++e.confusion[static_cast<size_t>(labels[i])][predicted];
      right += predicted == static_cast<size_t>(labels[i]) ? 1 : 0;
    }
    e.acc = rows == 0 ? kNaN : static_cast<double>(right) / static_cast<double>(rows);
    for (size_t c = 0; c < columns; ++c) {
      std::vector<int64_t> one(rows);
      std::vector<double> column(rows);
      for (size_t i = 0; i < rows; ++i) {
        one[i] = static_cast<size_t>(labels[i]) == c ? 1 : 0;
        column[i] = score(i, c);
      }
      e.per_class_auc.push_back(roc_auc(one, column));
    }
  } else {
    KILN_CHECK(y_true.dim() == 2 && static_cast<size_t>(y_true.size(1)) == columns,
               "metrics: multi-label labels must be [N, ", columns, "], got ", y_true.sizes());
    const std::vector<int64_t> labels = label_vector(y_true);
    double acc = 0;
    for (size_t c = 0; c < columns; ++c) {
      std::vector<int64_t> one(rows);
      std::vector<double> column(rows);
      int64_t right = 0;
      for (size_t i = 0; i < rows; ++i) {
        one[i] = labels[i * columns + c];
        column[i] = score(i, c);
        right += (column[i] > threshold ? 1 : 0) == one[i] ? 1 : 0;
      }
      e.per_class_auc.push_back(roc_auc(one, column));
      acc += rows == 0 ? kNaN : static_cast<double>(right) / static_cast<double>(rows);
    }
    e.acc = acc / static_cast<double>(columns);
  }
  e.auc = std::accumulate(e.per_class_auc.begin(), e.per_class_auc.end(), 0.0) / static_cast<double>(columns);
  return e;
}

}  // namespace kiln::train
