// Evaluating a model on one split: eval mode, NoGradGuard, the run's mixed precision, the
// loss and scores kept on the device and read back once at the end, then MedMNIST's
// metrics (train/metrics.h) on the scores.
//
//   const train::SplitEvaluation val = train::evaluate_split(model, val_batches, objective, amp, task,
//   epoch); std::printf("val AUC %.3f ACC %.3f\n", val.metrics.auc, val.metrics.acc);
#pragma once

#include <cstdint>

#include "nn/layer.h"
#include "train/amp.h"
#include "train/device_batches.h"
#include "train/metrics.h"
#include "train/objective.h"

namespace kiln::train {

struct SplitEvaluation {
  double loss = 0;        // mean per sample
  Evaluation metrics;     // at the 0.5 threshold
  Tensor labels, scores;  // every sample's, in the loader's order, on the CPU
};

// The model's forward pass as a run's mixed precision makes it: under autocast for O1, the
// input cast for O2/O3 and the output back to float32 (train/amp.h). The caller holds the
// AutocastGuard, so that the loss is computed under it too.
Tensor amp_forward(nn::Layer& model, const AmpProperties& amp, const Tensor& input);

// Evaluates every batch of `batches` (started at `loader_epoch`: an unshuffled loader gives
// the same batches whatever it is) and leaves the model in eval mode.
SplitEvaluation evaluate_split(nn::Layer& model, DeviceBatches& batches, const Objective& objective,
                               const AmpProperties& amp, Task task, int64_t loader_epoch = 0);

}  // namespace kiln::train
