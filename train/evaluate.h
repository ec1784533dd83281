// Evaluating a model on one split: eval mode, NoGradGuard, the run's mixed precision, the
// loss and scores kept on the device and read back once at the end, then MedMNIST's
// metrics (train/metrics.h) on the scores.
//
//   data::DevicePrefetcher val_batches(val_loader, device);
//   const train::SplitEvaluation val = train::evaluate_split(model, val_batches, objective, amp, task);
//   std::printf("val AUC %.3f ACC %.3f\n", val.metrics.auc, val.metrics.acc);
#pragma once

#include <cstdint>

#include "data/prefetcher.h"
#include "nn/layer.h"
#include "train/amp.h"
#include "train/choices.h"
#include "train/metrics.h"
#include "train/objective.h"

namespace kiln::train {

struct SplitEvaluation {
  double loss = 0;        // mean per sample
  Evaluation metrics;     // at the 0.5 threshold
  Tensor labels, scores;  // every sample's, in the loader's order, on the CPU
  // A metric by name (train/task.h): auc, acc, or the loss.
  double metric(Monitor which) const;
};

// Evaluates every batch of `batches` (started at `loader_epoch`: an unshuffled loader gives
// the same batches whatever it is) and leaves the model in eval mode.
// The scores of every batch (no labels needed), on the CPU: what `kiln predict` writes.
Tensor predict_scores(nn::Layer& model, data::DevicePrefetcher& batches, const Objective& objective,
                      const AmpProperties& amp);

SplitEvaluation evaluate_split(nn::Layer& model, data::DevicePrefetcher& batches, const Objective& objective,
                               const AmpProperties& amp, Task task, int64_t loader_epoch = 0);

}  // namespace kiln::train
