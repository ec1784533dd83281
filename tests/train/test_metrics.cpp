// MedMNIST's metrics (train/metrics.h) against scikit-learn and MedMNIST's own evaluator on
// fixed score vectors: the expected numbers below are what make_metrics_fixtures.py (beside
// this file) printed. Binary with ties and a score of exactly 0.5 (MedMNIST's strict >),
// multi-class with tied columns and argmax ties, multi-label; the confusion matrices,
// sensitivity and specificity; Youden's threshold and the ACC at it; AUC undefined (one
// class) as NaN; bad input as errors.
#include <gtest/gtest.h>

#include <cmath>

#include "core/ops.h"
#include "tests/test_util.h"
#include "train/metrics.h"

namespace kiln {
namespace {

using train::Task;

const std::vector<int64_t> kBinaryTrue = {0, 1, 1, 0, 1, 0, 0, 1, 1, 0};
const std::vector<double> kBinaryPositive = {0.1, 0.7, 0.7, 0.7, 0.5, 0.5, 0.2, 0.9, 0.3, 0.6};

Tensor binary_scores() {  // [N, 2] softmax-like columns, as a 2-class model outputs
  const Tensor positive = tensor(kBinaryPositive);
  return stack({ones_like(positive).sub(positive), positive}, 1);
}

TEST(Metrics, BinaryAsMedMnistAndScikitLearn) {
  const train::Evaluation e = train::evaluate(Task::Binary, tensor(kBinaryTrue), binary_scores());
  EXPECT_NEAR(e.auc, 0.74, 1e-12);
  EXPECT_NEAR(e.acc, 0.6, 1e-12);  // 0.5 itself is negative (score > 0.5)
  EXPECT_EQ(e.confusion, (std::vector<std::vector<int64_t>>{{3, 2}, {2, 3}}));
  EXPECT_NEAR(e.sensitivity, 3.0 / 5, 1e-12);
  EXPECT_NEAR(e.specificity, 3.0 / 5, 1e-12);
  // The positive column alone gives the same.
  EXPECT_NEAR(train::evaluate(Task::Binary, tensor(kBinaryTrue), tensor(kBinaryPositive)).auc, 0.74, 1e-12);
  EXPECT_EQ(e.samples, 10);
}

TEST(Metrics, YoudenThresholdAndTheAccuracyAtIt) {
  const double t = train::youden_threshold(kBinaryTrue, kBinaryPositive);
  EXPECT_EQ(t, 0.3);
  EXPECT_NEAR(train::accuracy_at(kBinaryTrue, kBinaryPositive, t), 0.7, 1e-12);
}

TEST(Metrics, MultiClassAsMedMnistAndScikitLearn) {
  const Tensor y_true = tensor<int64_t>({0, 2, 1, 2, 0, 1, 1, 2});
  const Tensor y_score = tensor<double>({0.6, 0.3, 0.1, 0.2, 0.2, 0.6, 0.3, 0.4, 0.3, 0.1, 0.3, 0.6,
                                         0.4, 0.4, 0.2, 0.5, 0.3, 0.2, 0.2, 0.7, 0.1, 0.3, 0.3, 0.4},
                                        {8, 3});
  const train::Evaluation e = train::evaluate(Task::MultiClass, y_true, y_score);
  EXPECT_NEAR(e.auc, 0.9055555555555556, 1e-12);
  ASSERT_EQ(e.per_class_auc.size(), 3u);
  EXPECT_NEAR(e.per_class_auc[0], 0.9166666666666667, 1e-12);
  EXPECT_NEAR(e.per_class_auc[1], 0.8, 1e-12);
  EXPECT_NEAR(e.per_class_auc[2], 1.0, 1e-12);
  EXPECT_NEAR(e.acc, 0.875, 1e-12);  // [0.4, 0.4, 0.2] is class 0: the first maximum
  EXPECT_EQ(e.confusion, (std::vector<std::vector<int64_t>>{{2, 0, 0}, {1, 2, 0}, {0, 0, 3}}));
  // float32 scores and int32 labels read the same.
  EXPECT_NEAR(train::evaluate(Task::MultiClass, y_true.to(DType::Int32), y_score.to(DType::Float32)).auc,
              0.9055555555555556, 1e-6);
}

TEST(Metrics, MultiLabelAsMedMnistAndScikitLearn) {
  const Tensor y_true = tensor<int64_t>({1, 0, 0, 1, 1, 1, 0, 0, 1, 0, 0, 1}, {6, 2});
  const Tensor y_score = tensor<double>({0.8, 0.1, 0.4, 0.6, 0.5, 0.9, 0.2, 0.3, 0.6, 0.6, 0.3, 0.5}, {6, 2});
  const train::Evaluation e = train::evaluate(Task::MultiLabel, y_true, y_score);
  EXPECT_NEAR(e.auc, 0.9166666666666667, 1e-12);
  EXPECT_NEAR(e.acc, 0.75, 1e-12);
  EXPECT_TRUE(e.confusion.empty());
}

TEST(Metrics, AucOfOneClassIsNaNAndBadInputIsAnError) {
  EXPECT_TRUE(std::isnan(train::roc_auc({1, 1, 1}, {0.2, 0.4, 0.9})));
  EXPECT_TRUE(std::isnan(train::youden_threshold({0, 0}, {0.2, 0.4})));
  // Ties everywhere: chance.
  EXPECT_EQ(train::roc_auc({0, 1, 0, 1}, {0.5, 0.5, 0.5, 0.5}), 0.5);
  EXPECT_KILN_ERROR(train::roc_auc({0, 2}, {0.1, 0.2}), "roc_auc: a binary label is 2");
  EXPECT_KILN_ERROR(train::roc_auc({0, 1}, {0.1}), "roc_auc: 2 labels for 1 scores");
  EXPECT_KILN_ERROR(train::roc_auc({0, 1}, {0.1, std::nan("")}), "roc_auc: a score is NaN");
  EXPECT_KILN_ERROR(train::evaluate(Task::Binary, tensor<int64_t>({0, 1}), ones({2, 3})),
                    "binary scores must be [N] or [N, 2]");
  EXPECT_KILN_ERROR(train::evaluate(Task::MultiClass, tensor<int64_t>({0, 5}), ones({2, 3})),
                    "label 5 of 3 classes");
  EXPECT_KILN_ERROR(train::evaluate(Task::MultiClass, tensor<int64_t>({0}), ones({2, 3})),
                    "[1] labels for [2, 3] scores");
  EXPECT_KILN_ERROR(train::parse_task("regression"), "unknown task 'regression'");
  EXPECT_EQ(train::parse_task("multi-label, binary-class"), Task::MultiLabel);
  EXPECT_EQ(train::parse_task("ordinal-regression"), Task::MultiClass);
}

}  // namespace
}  // namespace kiln
