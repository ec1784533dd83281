// evaluate_split (train/evaluate.h): scores and the loss sum stay on the device during the
// pass; one copy to the host at the end.
#include "train/evaluate.h"

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
    default: throw Error(std::string("evaluation: no metric ") + choice_name(which) + " for this task");
  }
}

SplitEvaluation evaluate_split(nn::Layer& model, data::DevicePrefetcher& batches, const Objective& objective,
                               const AmpProperties& amp, Task task, int64_t loader_epoch) {
  model.eval();
  const NoGradGuard no_grad;
  const AutocastGuard autocast(amp.low_dtype, amp.enabled_autocast);
  std::vector<Tensor> scores, labels;
  Tensor loss_sum;
  int64_t samples = 0;
  for (data::Batch& batch : batches.epoch(loader_epoch)) {
    const Tensor& y = batch.at(data::kLabel);
    const Tensor logits = amp_forward(model, amp, batch.at(data::kImage));
    const Tensor batch_loss = mul(objective.loss(logits, y), static_cast<double>(y.size(0)));
    loss_sum = loss_sum.defined() ? add(loss_sum, batch_loss) : batch_loss;
    scores.push_back(objective.scores(logits).to(DType::Float32));
    labels.push_back(y);
    samples += y.size(0);
  }
  SplitEvaluation result;
  if (samples == 0) return result;
  result.scores = cat(scores).to(Device::cpu());
  result.labels = cat(labels).to(Device::cpu());
  result.loss = loss_sum.item<double>() / static_cast<double>(samples);
  result.metrics = evaluate(task, result.labels, result.scores);
  return result;
}

}  // namespace kiln::train
