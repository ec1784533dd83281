// Objective: the table in train/objective.h.
#include "train/objective.h"

#include <cmath>
#include <limits>

#include "core/error.h"
#include "core/ops.h"

namespace kiln::train {
namespace {

double parse_pos_weight(const std::string& text, const std::vector<int64_t>& counts) {
  if (text.empty()) return std::numeric_limits<double>::quiet_NaN();
  if (text == "auto") {
    KILN_CHECK(counts.size() == 2 && counts[1] > 0,
               "pos-weight auto: the training set has no positive sample");
    return static_cast<double>(counts[0]) / static_cast<double>(counts[1]);
  }
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  KILN_CHECK(used == text.size() && std::isfinite(value) && value > 0,
             "pos-weight is a positive number or auto, got '", text, "'");
  return value;
}

}  // namespace

std::string resolved_loss(const std::string& loss, Task task) {
  if (loss != "auto") return loss;
  return task == Task::MultiLabel ? "multilabel-bce" : "cross-entropy";
}

int64_t loss_outputs(const std::string& resolved, int64_t classes) {
  return resolved == "bce" || resolved == "mse" ? 1 : classes;
}

Objective::Objective(const TrainConfig& config, Task task, int64_t classes,
                     const std::vector<int64_t>& class_counts, Device device)
    : name_(resolved_loss(config.loss, task)),
      task_(task),
      classes_(classes),
      outputs_(loss_outputs(name_, classes)),
      label_smoothing_(config.label_smoothing),
      pos_weight_value_(std::numeric_limits<double>::quiet_NaN()) {
  const TensorOptions on_device{.dtype = DType::Float32, .device = device};
  if (name_ == "cross-entropy") {
    KILN_CHECK(task != Task::MultiLabel, "loss cross-entropy: the task is multi-label; use multilabel-bce");
    if (!config.class_weights.empty()) {
      KILN_CHECK(static_cast<int64_t>(config.class_weights.size()) == classes, "class-weights: ", classes,
                 " classes need ", classes, " weights, got ", config.class_weights.size());
      std::vector<float> weights(config.class_weights.begin(), config.class_weights.end());
      class_weights_ = tensor(weights).to(device);
    }
  } else if (name_ == "bce") {
    KILN_CHECK(task == Task::Binary, "loss bce: the task has ", classes,
               " classes; bce is for binary tasks (cross-entropy or multilabel-bce otherwise)");
    pos_weight_value_ = parse_pos_weight(config.pos_weight, class_counts);
    if (!std::isnan(pos_weight_value_)) pos_weight_ = full({1}, pos_weight_value_, on_device);
  } else if (name_ == "multilabel-bce") {
    KILN_CHECK(task == Task::MultiLabel, "loss multilabel-bce: the task is not multi-label");
  } else if (name_ == "mse") {
    KILN_CHECK(task != Task::MultiLabel, "loss mse: the task is multi-label");
    class_values_ = arange(0, classes, 1, on_device);
  } else {
    throw Error("unknown loss '" + name_ + "' (auto, cross-entropy, bce, multilabel-bce or mse)");
  }
  KILN_CHECK(name_ == "cross-entropy" || (config.class_weights.empty() && config.label_smoothing == 0),
             "class-weights and label-smoothing apply to the cross-entropy loss, not ", name_);
}

Tensor Objective::loss(const Tensor& logits, const Tensor& labels) const {
  if (name_ == "cross-entropy") {
    return cross_entropy(logits, labels, {.weight = class_weights_, .label_smoothing = label_smoothing_});
  }
  if (name_ == "bce") {
    return binary_cross_entropy_with_logits(logits.flatten(), labels.to(logits.dtype()),
                                            {.pos_weight = pos_weight_});
  }
  if (name_ == "multilabel-bce") return binary_cross_entropy_with_logits(logits, labels.to(logits.dtype()));
  return mse_loss(logits.flatten(), labels.to(logits.dtype()));
}

Tensor Objective::scores(const Tensor& logits) const {
  if (name_ == "cross-entropy") return softmax(logits, 1);
  if (name_ == "bce") return sigmoid(logits.flatten());
  if (name_ == "multilabel-bce") return sigmoid(logits);
  const Tensor distance = sub(logits, class_values_);  // [N, 1] - [C] -> [N, C]
  return softmax(neg(mul(distance, distance)), 1);
}

Tensor Objective::correct(const Tensor& logits, const Tensor& labels) const {
  if (name_ == "bce") return sum(eq(gt(logits.flatten(), 0.0), gt(labels, 0)));
  if (name_ == "multilabel-bce") return sum(eq(gt(logits, 0.0), gt(labels, 0)));
  if (name_ == "cross-entropy") return sum(eq(argmax(logits, 1), labels));
  return sum(eq(argmax(scores(logits), 1), labels));
}

}  // namespace kiln::train
