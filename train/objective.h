// Objective: what a run minimises and how its outputs become scores for the metrics, from
// the configuration's loss and the task.
//
//   loss             outputs   training loss                         scores (for the metrics)
//   cross-entropy    C         cross_entropy(logits, y) (class       softmax(logits)
//                              weights, label smoothing)
//   bce (binary)     1         BCE-with-logits(logit, y), pos_weight  sigmoid(logit)
//   multilabel-bce   L         BCE-with-logits over [N, L] 0/1 labels sigmoid(logits)
//   mse              1         (output - y)^2, y the label as a      softmax over classes c of
//                              number (ordinal regression)           -(output - c)^2: nearest class first
// A regression (--task regression) of T targets:
//   mse, l1,         T         mean (output - y)^2, |output - y|,    the outputs themselves
//   smooth-l1                  or Huber's with beta 1, over [N, T]
// "auto" is cross-entropy for binary and multi-class tasks (MedMNIST's choice),
// multilabel-bce for multi-label ones and mse for a regression. pos_weight "auto" is
// negatives / positives of the training set (for VesselMNIST3D, about 7.6; the speed-up
// guide used 10).
//
// correct(logits, labels) is the running metric's sum as a device tensor, so that a
// training loop keeps it without reading anything back: the right predictions (argmax, or
// score > 0.5, or the nearest class; int64), or for a regression the absolute errors
// (float32; the epoch's MAE once divided by the values counted).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "train/config.h"
#include "train/metrics.h"

namespace kiln::train {

// The loss "auto" resolves to for `task`, and the model outputs a loss needs: what Objective
// itself uses, for building the model before the objective exists.
LossChoice resolved_loss(LossChoice loss, Task task);
int64_t loss_outputs(LossChoice resolved, Task task, int64_t classes);

// What Objective::correct sums in: int64 counts, or a regression's float32 errors.
constexpr DType running_metric_dtype(Task task) { return task == Task::Regression ? DType::Float32 : DType::Int64; }

// What the loss is made of: the configuration's loss settings.
struct LossSettings {
  LossChoice loss = LossChoice::Auto;
  std::vector<double> class_weights = {};
  double label_smoothing = 0;
  std::string pos_weight = "";  // "", "auto" or a positive number
  static LossSettings of(const TrainConfig& config, LossChoice loss);
};

class Objective {
 public:
  // class_counts: the training set's samples per class (pos-weight auto), may be empty
  // otherwise. Errors name the setting that does not fit the task.
  Objective(const LossSettings& settings, Task task, int64_t classes, const std::vector<int64_t>& class_counts,
            Device device);
  // The same from a configuration whose loss has not been parsed (validate()) yet.
  Objective(const TrainConfig& config, Task task, int64_t classes, const std::vector<int64_t>& class_counts,
            Device device);

  std::string name() const { return choice_name(loss_); }  // the resolved loss
  LossChoice loss_choice() const { return loss_; }
  int64_t outputs() const { return outputs_; }       // the model's output features
  // The mean loss of a batch (float32 logits; labels as the dataset gives them).
  Tensor loss(const Tensor& logits, const Tensor& labels) const;
  // Scores for the metrics: [N, C] probabilities, or [N] for a binary bce.
  Tensor scores(const Tensor& logits) const;
  // How many predictions are right, an int64 [] tensor on the logits' device; for a
  // regression the sum of absolute errors, float32 [].
  Tensor correct(const Tensor& logits, const Tensor& labels) const;
  // The dtype correct() sums in (running_metric_dtype).
  DType correct_dtype() const { return running_metric_dtype(task_); }
  // The positives' weight in use (bce), or NaN.
  double pos_weight() const { return pos_weight_value_; }

 private:
  LossChoice loss_;
  Task task_;
  int64_t outputs_;
  Tensor class_weights_, pos_weight_, class_values_;
  double label_smoothing_ = 0;
  double pos_weight_value_;
  // Note [Labels in range]: the labels seen since the last check, and their flag.
  struct LabelCheck;
  std::shared_ptr<LabelCheck> label_check_;
  void check_labels_within(const Tensor& labels, int64_t highest, const char* what) const;
};

}  // namespace kiln::train
