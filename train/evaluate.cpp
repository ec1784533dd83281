// evaluate_split (train/evaluate.h): scores and the loss sum stay on the device during the
// pass; one copy to the host at the end.
#include "train/evaluate.h"

#include <functional>

#include "core/autocast.h"
#include "core/autograd/grad_mode.h"
#include "core/error.h"
#include "core/ops.h"

namespace kiln::train {

double SplitEvaluation::metric(Monitor which) const {
  switch (which) {
    case Monitor::Auc: return metrics.auc;
    case Monitor::Acc: return metrics.acc;
    case Monitor::Loss: return loss;
    case Monitor::Mae: return metrics.mae;
    case Monitor::Rmse: return metrics.rmse;
    case Monitor::R2: return metrics.r2;
    default: throw Error(std::string("evaluation: no metric ") + choice_name(which) + " for this task");
  }
}

namespace {

// The model's forward pass over every batch in eval mode, without gradients, under the
// run's mixed precision; `each` gets the batch and its logits.
void forward_each(nn::Layer& model, data::DevicePrefetcher& batches, const AmpProperties& amp, int64_t loader_epoch,
                  const std::function<void(const data::Batch&, const Tensor&)>& each) {
  model.eval();
  const NoGradGuard no_grad;
  const AutocastGuard autocast(amp.low_dtype, amp.enabled_autocast);
  for (data::Batch& batch : batches.epoch(loader_epoch)) each(batch, amp_forward(model, amp, batch.at(data::kImage)));
}

}  // namespace

SplitEvaluation evaluate_split(nn::Layer& model, data::DevicePrefetcher& batches, const Objective& objective,
                               const AmpProperties& amp, Task task, int64_t loader_epoch) {
  std::vector<Tensor> scores, labels;
  Tensor loss_sum;
  int64_t samples = 0;
  forward_each(model, batches, amp, loader_epoch, [&](const data::Batch& batch, const Tensor& logits) {
    const Tensor& y = batch.at(data::kLabel);
    const Tensor batch_loss = mul(objective.loss(logits, y), static_cast<double>(y.size(0)));
    loss_sum = loss_sum.defined() ? add(loss_sum, batch_loss) : batch_loss;
    scores.push_back(objective.scores(logits).to(DType::Float32));
    labels.push_back(y);
    samples += y.size(0);
  });
  SplitEvaluation result;
  if (samples == 0) return result;
  result.scores = cat(scores).to(Device::cpu());
  result.labels = cat(labels).to(Device::cpu());
  result.loss = loss_sum.item<double>() / static_cast<double>(samples);
  result.metrics = evaluate(task, result.labels, result.scores);
  return result;
}

Tensor predict_scores(nn::Layer& model, data::DevicePrefetcher& batches, const Objective& objective,
                      const AmpProperties& amp) {
  std::vector<Tensor> scores;
  forward_each(model, batches, amp, 0, [&](const data::Batch&, const Tensor& logits) {
    scores.push_back(objective.scores(logits).to(DType::Float32));
  });
  KILN_CHECK(!scores.empty(), "predict: no input to score");
  return cat(scores).to(Device::cpu());
}

}  // namespace kiln::train
