// Streams and the per-thread current stream (stream.h). The current streams live in a
// thread_local table indexed by device; an unset entry means the default stream.
#include "kernels/cuda/stream.h"

#include <utility>
#include <vector>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/runtime.h"

namespace kiln::cuda {

void Stream::synchronize() const {
  DeviceGuard guard(device_);
  KILN_CUDA_CHECK(cudaStreamSynchronize(handle_));
}

bool Stream::query() const {
  DeviceGuard guard(device_);
  const cudaError_t status = cudaStreamQuery(handle_);
  if (status == cudaErrorNotReady) {
    cudaGetLastError();
    return false;
  }
  KILN_CUDA_CHECK(status);
  return true;
}

OwnedStream::OwnedStream(int device, int priority) : device_(device) {
  DeviceGuard guard(device);
  KILN_CUDA_CHECK(cudaStreamCreateWithPriority(&handle_, cudaStreamNonBlocking, priority));
}

// Waits for the stream's work before destroying it. cudaStreamDestroy alone returns at
// once and lets queued work run on; but the caching allocator knows streams only by their
// handle (blocks freed on this stream stay cached under it), and the driver may hand the
// same handle to the next stream created. That stream would then be given blocks that
// kernels of this one are still reading or writing. After the synchronize they are idle.
// Errors are ignored: a destructor must not throw.
OwnedStream::~OwnedStream() {
  if (handle_ != nullptr) {
    DeviceGuard guard(device_);
    cudaStreamSynchronize(handle_);
    cudaStreamDestroy(handle_);
  }
}

OwnedStream::OwnedStream(OwnedStream&& other) noexcept
    : device_(other.device_), handle_(std::exchange(other.handle_, nullptr)) {}

OwnedStream& OwnedStream::operator=(OwnedStream&& other) noexcept {
  if (this != &other) {
    std::swap(device_, other.device_);
    std::swap(handle_, other.handle_);
  }
  return *this;
}

namespace {

std::vector<cudaStream_t>& current_streams() {
  thread_local std::vector<cudaStream_t> streams;
  return streams;
}

}  // namespace

Stream current_stream(int device) {
  const auto& streams = current_streams();
  const size_t i = static_cast<size_t>(device);
  return Stream(device, i < streams.size() ? streams[i] : nullptr);
}

void set_current_stream(Stream stream) {
  check_device_index(stream.device());
  auto& streams = current_streams();
  const size_t i = static_cast<size_t>(stream.device());
  if (i >= streams.size()) streams.resize(i + 1, nullptr);
  streams[i] = stream.handle();
}

StreamGuard::StreamGuard(Stream stream) : previous_(current_stream(stream.device())) { set_current_stream(stream); }

StreamGuard::~StreamGuard() {
  auto& streams = current_streams();
  streams[static_cast<size_t>(previous_.device())] = previous_.handle();
}

}  // namespace kiln::cuda
