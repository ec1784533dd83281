// RunningSums (train/running_sums.h): two device scalars and their last reads.
#include "train/running_sums.h"

#include <limits>

#include "core/autograd/grad_mode.h"
#include "core/ops.h"

namespace kiln::train {
namespace {
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
}

RunningSums::RunningSums(Device device, DType metric_dtype)
    : device_(device), metric_dtype_(metric_dtype), last_loss_(kNaN), last_acc_(kNaN) {
  loss_sum_ = zeros({}, {.dtype = DType::Float32, .device = device_});
  correct_ = zeros({}, {.dtype = metric_dtype_, .device = device_});
}

// In place, here and in load(): a step captured by a CUDA graph goes on adding into the
// tensors it captured (Note [A graphed step] in train/graphed_step.h).
void RunningSums::reset(RunProgress& progress) {
  loss_sum_.zero_();
  correct_.zero_();
  progress.seen = progress.label_elements = 0;
  last_loss_ = last_acc_ = kNaN;
}

void RunningSums::add(const Tensor& loss, const Tensor& correct, int64_t samples, int64_t label_elements,
                      RunProgress& progress) {
  accumulate(loss, correct, samples);
  count(samples, label_elements, progress);
}

void RunningSums::accumulate(const Tensor& loss, const Tensor& correct, int64_t samples) {
  const NoGradGuard no_grad;
  loss_sum_.add_(mul(loss.detach(), static_cast<double>(samples)));
  correct_.add_(correct);
}

void RunningSums::count(int64_t samples, int64_t label_elements, RunProgress& progress) {
  progress.seen += samples;
  progress.label_elements += label_elements;
}

void RunningSums::read(const RunProgress& progress) {
  last_loss_ = progress.seen > 0 ? loss_sum_.item<double>() / static_cast<double>(progress.seen) : kNaN;
  const double metric_sum = metric_dtype_ == DType::Int64 ? static_cast<double>(correct_.item<int64_t>())
                                                          : correct_.item<double>();
  last_acc_ = progress.label_elements > 0 ? metric_sum / static_cast<double>(progress.label_elements) : kNaN;
}

safetensors::NamedTensors RunningSums::tensors() const { return {{"loss_sum", loss_sum_}, {"correct", correct_}}; }

void RunningSums::load(const safetensors::NamedTensors& tensors) {
  for (const auto& [name, tensor] : tensors) {
    if (name == "loss_sum") loss_sum_.copy_(tensor.reshape({}));
    if (name == "correct") correct_.copy_(tensor.reshape({}));
  }
}

}  // namespace kiln::train
