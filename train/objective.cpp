// Objective: the table in train/objective.h.
#include "train/objective.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "core/deferred_check.h"
#include "core/error.h"
#include "core/host_sync.h"
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

// Note [Labels in range]: cross-entropy's gather refuses a class index out of range, but
// bce and mse take any number as a target and would train on a label outside the classes
// without a word. So their labels are checked too, without a host sync in the step: each
// batch adds a few small ops on the labels' device, or-ed into one flag, and one deferred
// check (Note [Deferred index checks] in core/deferred_check.h) reads that flag where the
// loop reads the device anyway, once per log interval; only when it is set are the
// interval's labels read, to name the bad one. Without a deferring loop (evaluation, a
// program's own loop) the check runs at once.
// In a step captured by a CUDA graph the same ops are replayed, so the flag is updated in
// place and never replaced (the graph goes on writing the tensor it captured), and the
// check is handed to the capture, which queues it again after its replays (Note [Index
// checks in a CUDA graph]). A replayed step's labels are its static input, overwritten
// at every replay: they are not held, and a bad label seen in a replay is reported
// without its value.
struct Objective::LabelCheck {
  Tensor outside;               // bool []: some label since the last check is outside
  std::vector<Tensor> labels;   // the eager batches' labels since then (held, not copied)
  bool queued = false;          // a deferred check will read them
};

void Objective::check_labels_within(const Tensor& labels, int64_t highest, const char* what) const {
  LabelCheck& c = *label_check_;
  // "not within", so that a NaN label (which no comparison holds for) is outside too
  const Tensor outside = any(logical_not(logical_and(ge(labels, 0), le(labels, highest))));
  if (!c.outside.defined() || c.outside.device() != labels.device())
    c.outside = zeros({}, {.dtype = DType::Bool, .device = labels.device()});
  c.outside.copy_(logical_or(c.outside, outside));
  const bool capturing = capturing_on_this_thread();
  if (!capturing) c.labels.push_back(labels);
  if (c.queued && !capturing) return;
  const std::shared_ptr<LabelCheck> state = label_check_;
  const DeferredCheck check = [state, highest, what, loss = choice_name(loss_)] {
    state->queued = false;
    const std::vector<Tensor> held = std::exchange(state->labels, {});
    if (!state->outside.item<bool>()) return;
    state->outside.zero_();
    for (const Tensor& batch : held) {
      for (const double v : batch.to(Device::cpu()).to(DType::Float64).flatten().to_vector<double>()) {
        if (!(v >= 0 && v <= static_cast<double>(highest)))
          throw Error(kiln::detail::str_cat("loss ", loss, ": a label is ", v, ", outside ", what, " 0 to ", highest,
                                            " (check the labels, or the number of classes)"));
      }
    }
    throw Error(kiln::detail::str_cat("loss ", loss, ": a label of a step replayed by a CUDA graph is outside ", what,
                                      " 0 to ", highest, " (check the labels, or the number of classes; run without "
                                      "--cuda-graphs to have the check name it)"));
  };
  const bool queued = defer_index_check(check);
  if (capturing) return;  // the capture holds the check now
  c.queued = queued;
  if (!queued) check();
}

LossChoice resolved_loss(LossChoice loss, Task task) {
  if (loss != LossChoice::Auto) return loss;
  switch (task) {
    case Task::MultiLabel: return LossChoice::MultilabelBce;
    case Task::Regression: return LossChoice::Mse;
    default: return LossChoice::CrossEntropy;
  }
}

int64_t loss_outputs(LossChoice resolved, Task task, int64_t classes) {
  if (task == Task::Regression) return classes;  // one output per target
  return resolved == LossChoice::Bce || resolved == LossChoice::Mse ? 1 : classes;
}

LossSettings LossSettings::of(const TrainConfig& config, LossChoice loss) {
  return {.loss = loss,
          .class_weights = config.class_weights,
          .label_smoothing = config.label_smoothing,
          .pos_weight = config.pos_weight};
}

Objective::Objective(const TrainConfig& config, Task task, int64_t classes,
                     const std::vector<int64_t>& class_counts, Device device)
    : Objective(LossSettings::of(config, parse_choice<LossChoice>(config.loss)), task, classes, class_counts,
                device) {}

Objective::Objective(const LossSettings& settings, Task task, int64_t classes,
                     const std::vector<int64_t>& class_counts, Device device)
    : loss_(resolved_loss(settings.loss, task)),
      task_(task),
      outputs_(loss_outputs(loss_, task, classes)),
      label_smoothing_(settings.label_smoothing),
      pos_weight_value_(std::numeric_limits<double>::quiet_NaN()),
      label_check_(std::make_shared<LabelCheck>()) {
  const TensorOptions on_device{.dtype = DType::Float32, .device = device};
  const bool regression_loss = loss_ == LossChoice::Mse || loss_ == LossChoice::L1 || loss_ == LossChoice::SmoothL1;
  KILN_CHECK(task != Task::Regression || regression_loss, "loss ", choice_name(loss_),
             ": the task is a regression; use mse, l1 or smooth-l1");
  switch (loss_) {
    case LossChoice::CrossEntropy:
      KILN_CHECK(task != Task::MultiLabel, "loss cross-entropy: the task is multi-label; use multilabel-bce");
      if (!settings.class_weights.empty()) {
        KILN_CHECK(static_cast<int64_t>(settings.class_weights.size()) == classes, "class-weights: ", classes,
                   " classes need ", classes, " weights, got ", settings.class_weights.size());
        std::vector<float> weights(settings.class_weights.begin(), settings.class_weights.end());
        class_weights_ = tensor(weights).to(device);
      }
      break;
    case LossChoice::Bce:
      KILN_CHECK(task == Task::Binary, "loss bce: the task has ", classes,
                 " classes; bce is for binary tasks (cross-entropy or multilabel-bce otherwise)");
      pos_weight_value_ = parse_pos_weight(settings.pos_weight, class_counts);
      if (!std::isnan(pos_weight_value_)) pos_weight_ = full({1}, pos_weight_value_, on_device);
      break;
    case LossChoice::MultilabelBce:
      KILN_CHECK(task == Task::MultiLabel, "loss multilabel-bce: the task is not multi-label");
      break;
    case LossChoice::Mse:
      KILN_CHECK(task != Task::MultiLabel, "loss mse: the task is multi-label");
      if (task != Task::Regression) class_values_ = arange(0, classes, 1, on_device);
      break;
    case LossChoice::L1:
    case LossChoice::SmoothL1:
      KILN_CHECK(task == Task::Regression, "loss ", choice_name(loss_), " is a regression loss (--task regression)");
      break;
    case LossChoice::Auto: break;  // resolved above
  }
  KILN_CHECK(loss_ == LossChoice::CrossEntropy || (settings.class_weights.empty() && settings.label_smoothing == 0),
             "class-weights and label-smoothing apply to the cross-entropy loss, not ", choice_name(loss_));
}

Tensor Objective::loss(const Tensor& logits, const Tensor& labels) const {
  if (task_ == Task::Regression) {
    const Tensor target = labels.to(logits.dtype()).reshape(logits.sizes());
    switch (loss_) {
      case LossChoice::L1: return l1_loss(logits, target);
      case LossChoice::SmoothL1: return smooth_l1_loss(logits, target);
      default: return mse_loss(logits, target);
    }
  }
  switch (loss_) {
    case LossChoice::CrossEntropy:
      return cross_entropy(logits, labels, {.weight = class_weights_, .label_smoothing = label_smoothing_});
    case LossChoice::Bce:
      check_labels_within(labels, 1, "the classes");
      return binary_cross_entropy_with_logits(logits.flatten(), labels.to(logits.dtype()), {.pos_weight = pos_weight_});
    case LossChoice::MultilabelBce:
      check_labels_within(labels, 1, "the values");
      return binary_cross_entropy_with_logits(logits, labels.to(logits.dtype()));
    default:
      check_labels_within(labels, class_values_.numel() - 1, "the classes");
      return mse_loss(logits.flatten(), labels.to(logits.dtype()));
  }
}

Tensor Objective::scores(const Tensor& logits) const {
  if (task_ == Task::Regression) return logits;  // the predicted values
  switch (loss_) {
    case LossChoice::CrossEntropy: return softmax(logits, 1);
    case LossChoice::Bce: return sigmoid(logits.flatten());
    case LossChoice::MultilabelBce: return sigmoid(logits);
    default: {
      const Tensor distance = sub(logits, class_values_);  // [N, 1] - [C] -> [N, C]
      return softmax(neg(mul(distance, distance)), 1);
    }
  }
}

Tensor Objective::correct(const Tensor& logits, const Tensor& labels) const {
  if (task_ == Task::Regression) return sum(abs(sub(logits.to(DType::Float32), labels.to(DType::Float32).reshape(logits.sizes()))));
  switch (loss_) {
    case LossChoice::Bce: return sum(eq(gt(logits.flatten(), 0.0), gt(labels, 0)));
    case LossChoice::MultilabelBce: return sum(eq(gt(logits, 0.0), gt(labels, 0)));
    case LossChoice::CrossEntropy: return sum(eq(argmax(logits, 1), labels));
    default: return sum(eq(argmax(scores(logits), 1), labels));
  }
}

}  // namespace kiln::train
