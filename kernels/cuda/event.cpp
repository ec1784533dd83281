// CUDA events (event.h): created on first record, on the recording stream's device.
#include "kernels/cuda/event.h"

#include <utility>

#include "core/error.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/runtime.h"

namespace kiln::cuda {

Event::Event(bool enable_timing) : enable_timing_(enable_timing) {}

Event::~Event() {
  if (event_ != nullptr) {
    DeviceGuard guard(device_);
    cudaEventDestroy(event_);
  }
}

Event::Event(Event&& other) noexcept
    : enable_timing_(other.enable_timing_),
      device_(std::exchange(other.device_, -1)),
      event_(std::exchange(other.event_, nullptr)) {}

Event& Event::operator=(Event&& other) noexcept {
  if (this != &other) {
    std::swap(enable_timing_, other.enable_timing_);
    std::swap(device_, other.device_);
    std::swap(event_, other.event_);
  }
  return *this;
}

void Event::record(Stream stream) {
  DeviceGuard guard(stream.device());
  if (event_ == nullptr) {
    device_ = stream.device();
    KILN_CUDA_CHECK(cudaEventCreateWithFlags(&event_, enable_timing_ ? cudaEventDefault : cudaEventDisableTiming));
  }
  KILN_CHECK(device_ == stream.device(), "cuda: an event created on cuda:", device_,
             " cannot be recorded on a stream of cuda:", stream.device());
  KILN_CUDA_CHECK(cudaEventRecord(event_, stream.handle()));
}

void Event::block(Stream stream) const {
  if (event_ == nullptr) return;
  DeviceGuard guard(stream.device());
  KILN_CUDA_CHECK(cudaStreamWaitEvent(stream.handle(), event_, 0));
}

bool Event::query() const {
  if (event_ == nullptr) return true;
  DeviceGuard guard(device_);
  const cudaError_t status = cudaEventQuery(event_);
  if (status == cudaErrorNotReady) {
    cudaGetLastError();
    return false;
  }
  KILN_CUDA_CHECK(status);
  return true;
}

void Event::synchronize() const {
  if (event_ == nullptr) return;
  DeviceGuard guard(device_);
  KILN_CUDA_CHECK(cudaEventSynchronize(event_));
}

float Event::elapsed_ms_since(const Event& start) const {
  KILN_CHECK(event_ != nullptr && start.event_ != nullptr, "cuda: elapsed time between events that were not recorded");
  float ms = 0.0f;
  KILN_CUDA_CHECK(cudaEventElapsedTime(&ms, start.event_, event_));
  return ms;
}

}  // namespace kiln::cuda
