// CUDA streams: a handle type, an owning type, and each thread's current stream.
//
// Every kernel and copy Kiln launches on a device goes to that device's *current stream*
// for the calling thread. It starts as the device's default stream (the legacy stream 0,
// as in PyTorch, which orders itself with every other blocking stream) and can be changed
// for a scope with StreamGuard, e.g. to overlap host-to-device copies of the next batch
// with compute on the default stream. Work on two streams is unordered unless an Event
// orders it (event.h); memory used across streams must be recorded with the caching
// allocator's record_stream (caching_allocator.h) so it is not reused too early.
//
//   Stream        a non-owning (device, cudaStream_t) pair, cheap to copy.
//   OwnedStream   creates a non-blocking stream and destroys it (RAII, move-only).
#pragma once

#include <cuda_runtime_api.h>

namespace kiln::cuda {

class Stream {
 public:
  Stream(int device, cudaStream_t handle) : device_(device), handle_(handle) {}
  // The default (legacy, null) stream of `device`.
  static Stream default_stream(int device) { return Stream(device, nullptr); }

  int device() const { return device_; }
  cudaStream_t handle() const { return handle_; }
  // Blocks the host until all work queued on this stream is done.
  void synchronize() const;
  // True when all work queued so far has finished (never blocks).
  bool query() const;

  friend bool operator==(const Stream& a, const Stream& b) {
    return a.device_ == b.device_ && a.handle_ == b.handle_;
  }

 private:
  int device_;
  cudaStream_t handle_;
};

class OwnedStream {
 public:
  // A new stream on `device`, created with cudaStreamNonBlocking (no implicit ordering
  // with the default stream). Lower `priority` numbers run first (cudaDeviceGetStreamPriorityRange).
  explicit OwnedStream(int device, int priority = 0);
  // Waits for the stream's queued work, then destroys it (stream.cpp says why).
  ~OwnedStream();
  OwnedStream(OwnedStream&& other) noexcept;
  OwnedStream& operator=(OwnedStream&& other) noexcept;
  OwnedStream(const OwnedStream&) = delete;
  OwnedStream& operator=(const OwnedStream&) = delete;

  Stream stream() const { return Stream(device_, handle_); }
  operator Stream() const { return stream(); }

 private:
  int device_;
  cudaStream_t handle_ = nullptr;
};

// The calling thread's current stream on `device` (the default stream unless changed).
Stream current_stream(int device);
// Makes `stream` the calling thread's current stream on its device.
void set_current_stream(Stream stream);

// Sets the current stream of `stream.device()` for a scope, and restores the previous one.
class StreamGuard {
 public:
  explicit StreamGuard(Stream stream);
  ~StreamGuard();
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

 private:
  Stream previous_;
};

}  // namespace kiln::cuda
