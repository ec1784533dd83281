// HostStage (host_stage.h): in place, or a (pinned) staging copy in and out.
#include "dist/ring/host_stage.h"

#include "core/autograd/grad_mode.h"
#include "core/ops/factory.h"

namespace kiln::dist::ring {

std::shared_ptr<Event> record_ready(const Tensor& tensor) {
  if (tensor.device().is_cpu()) return nullptr;
  auto ready = std::make_shared<Event>();
  ready->record(Stream::current(tensor.device()));
  return ready;
}

HostStage::HostStage(const Tensor& tensor, bool copy_in, const std::shared_ptr<Event>& ready)
    : tensor_(tensor) {
  if (ready) ready->synchronize();
  if (tensor.device().is_cpu() && tensor.is_contiguous()) {
    host_ = tensor;
    return;
  }
  host_ = empty(tensor.sizes(), {.dtype = tensor.dtype(), .pin_memory = tensor.device().is_cuda()});
  if (copy_in) {
    NoGradGuard no_grad;
    host_.copy_(tensor);
  }
}

HostBuffer HostStage::buffer() const {
  return {static_cast<char*>(host_.data_ptr()), host_.numel(), host_.element_size()};
}

void HostStage::copy_out() const {
  if (host_.is_same(tensor_)) {
    tensor_.bump_version();
    return;
  }
  NoGradGuard no_grad;
  Tensor out = tensor_;
  out.copy_(host_);  // blocking: the result is in place when the collective's work completes
}

}  // namespace kiln::dist::ring
