// RunningSums: an epoch's training loss and its running metric (correct predictions, or a
// regression's absolute errors: Objective::correct), summed on the device, so a
// step reads nothing back; read() is the loop's one host read, at log steps (Note [A
// training step] in train/trainer.h). The samples and label values they are over are
// counted on the host, in the run's progress (train/run_progress.h).
//
//   sums.add(loss, objective.correct(logits, y), y.size(0));   // every micro-batch
//   sums.read(progress);                                          // at a log step
//   sums.loss();                                                  // as last read
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "core/safetensors.h"
#include "train/run_progress.h"

namespace kiln::train {

class RunningSums {
 public:
  // `metric_dtype`: what the metric is summed in (Objective::correct_dtype).
  RunningSums(Device device, DType metric_dtype);

  // Zero sums (and counts) for a new epoch.
  void reset(RunProgress& progress);
  // A micro-batch's mean loss over `samples` samples and its count of right predictions
  // among `label_elements` label values (under NoGradGuard, on the device): accumulate()
  // and count() together.
  void add(const Tensor& loss, const Tensor& correct, int64_t samples, int64_t label_elements,
           RunProgress& progress);
  // The device half of add(), all a graphed step captures (the sums updated in place).
  void accumulate(const Tensor& loss, const Tensor& correct, int64_t samples);
  // The host half: the samples and label values the sums are over, in the progress.
  static void count(int64_t samples, int64_t label_elements, RunProgress& progress);
  // Reads the sums back (a host sync): the mean loss and the accuracy so far this epoch.
  void read(const RunProgress& progress);
  double loss() const { return last_loss_; }      // as last read; NaN before
  double accuracy() const { return last_acc_; }  // the running metric as last read; NaN before

  // For checkpoints ("running." tensors, Note [Checkpoint layout]).
  safetensors::NamedTensors tensors() const;
  void load(const safetensors::NamedTensors& tensors);

 private:
  Device device_;
  DType metric_dtype_;
  Tensor loss_sum_, correct_;
  double last_loss_, last_acc_;
};

}  // namespace kiln::train
