// HostStage (host_stage.h): in place, or a (pinned) staging copy in and out, whole or by
// chunks on a copy stream.
//
// Note [Overlapped staging]: a GPU tensor of S bytes staged whole costs S/PCIe before the
// first byte goes on the wire and S/PCIe after the last arrives. The ring needs its chunks
// one at a time: step 0 sends chunk r-1, step t reduces into chunk r-t-2, and a chunk is
// final after its last reduction (chunk r) or when the all-gather delivers it. So the
// device-to-host copies are queued in that order and the ring waits only for the chunk it
// is about to touch, while the later ones are still crossing PCIe; and each final chunk
// starts back to the GPU while the ring works on the others. What is left unhidden is
// about one chunk, S/N, each way.
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

HostStage::HostStage(const Tensor& tensor, const std::shared_ptr<Event>& ready) : tensor_(tensor) {
  if (ready) ready->synchronize();
  if (tensor.device().is_cpu() && tensor.is_contiguous()) {
    host_ = tensor;
    return;
  }
  NoGradGuard no_grad;
  if (on_gpu()) device_ = tensor.is_contiguous() ? tensor : tensor.contiguous();
  host_ = empty(tensor.sizes(), {.dtype = tensor.dtype(), .pin_memory = on_gpu()});
}

HostBuffer HostStage::buffer() const {
  return {static_cast<char*>(host_.data_ptr()), host_.numel(), host_.element_size()};
}

void HostStage::copy_in() {
  if (host_.is_same(tensor_)) return;
  NoGradGuard no_grad;
  host_.copy_(on_gpu() ? device_ : tensor_);
}

void HostStage::copy_out() {
  if (host_.is_same(tensor_)) {
    tensor_.bump_version();
    return;
  }
  NoGradGuard no_grad;
  tensor_.copy_(host_);  // blocking: the result is in place when the collective's work completes
}

Tensor HostStage::slice(const Tensor& t, int64_t chunk) const {
  const auto c = static_cast<size_t>(chunk);
  return t.reshape({-1}).narrow(0, bounds_[c], bounds_[c + 1] - bounds_[c]);
}

void HostStage::copy_in_async(const Stream& copies, const std::vector<int64_t>& bounds,
                              const std::vector<int64_t>& order) {
  KILN_ASSERT(on_gpu() && copies.device() == tensor_.device(),
              "copy_in_async of a CPU tensor or on another device");
  bounds_ = bounds;
  copies_ = copies;
  NoGradGuard no_grad;
  StreamGuard on(*copies_);
  for (const int64_t c : order) {
    Tensor into = slice(host_, c);
    into.copy_(slice(device_, c), /*non_blocking=*/true);
    copied_in_[c].record(*copies_);
  }
}

void HostStage::wait_in(int64_t chunk) {
  const auto it = copied_in_.find(chunk);
  if (it != copied_in_.end()) it->second.synchronize();
}

void HostStage::copy_out_async(int64_t chunk) {
  NoGradGuard no_grad;
  StreamGuard on(*copies_);
  Tensor into = slice(device_, chunk);
  into.copy_(slice(host_, chunk), /*non_blocking=*/true);
}

void HostStage::finish() {
  copies_->synchronize();  // every chunk is back on the device (so its memory is free to go)
  if (!device_.is_same(tensor_)) {
    NoGradGuard no_grad;
    tensor_.copy_(device_);
  } else {
    tensor_.bump_version();
  }
}

}  // namespace kiln::dist::ring
