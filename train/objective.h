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
// "auto" is cross-entropy for binary and multi-class tasks (MedMNIST's choice) and
// multilabel-bce for multi-label ones. pos_weight "auto" is negatives / positives of the
// training set (for VesselMNIST3D, about 7.6; the speed-up guide used 10).
//
// correct(logits, labels) counts the right predictions as a device tensor, so that a
// training loop keeps its accuracy without reading anything back (argmax, or score > 0.5,
// or the nearest class).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "train/config.h"
#include "train/metrics.h"

namespace kiln::train {

// The loss "auto" resolves to for `task`, and the model outputs a loss needs: what Objective
// itself uses, for building the model before the objective exists.
LossChoice resolved_loss(LossChoice loss, Task task);
int64_t loss_outputs(LossChoice resolved, int64_t classes);

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
  // How many predictions are right, an int64 [] tensor on the logits' device.
  Tensor correct(const Tensor& logits, const Tensor& labels) const;
  // The positives' weight in use (bce), or NaN.
  double pos_weight() const { return pos_weight_value_; }

 private:
  LossChoice loss_;
  Task task_;
  int64_t classes_, outputs_;
  Tensor class_weights_, pos_weight_, class_values_;
  double label_smoothing_ = 0;
  double pos_weight_value_;
};

}  // namespace kiln::train
