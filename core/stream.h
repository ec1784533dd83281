// kiln::Stream, kiln::Event, kiln::StreamGuard, kiln::record_stream: ordering a device's
// work across queues, as torch.cuda.Stream / Event / stream() / Tensor.record_stream do,
// without naming CUDA (the backend answers: core/backend.h, "streams and events").
//
// Work Kiln launches on a device goes to the calling thread's *current stream* of that
// device (the default stream unless a StreamGuard changes it). Work on two streams is
// unordered unless an Event orders it: record the event on the producing stream, make the
// consuming stream wait for it (no host block). Memory used by a stream other than the
// one it was allocated on must be recorded with record_stream, or the caching allocator
// could hand it to new work while the other stream still reads it.
//
//   const Stream copies = Stream::create(device);
//   Event ready;
//   { StreamGuard on(copies); next = batch.to(device, /*non_blocking=*/true); ready.record(copies); }
//   Stream::current(device).wait(ready);          // compute waits for the copy, the host does not
//   record_stream(next, Stream::current(device)); // freed only after compute is done with it
//
// On the CPU (a device without queues) everything has already run: one stream, events
// always complete, every call a no-op, so device-agnostic code needs no branches.
#pragma once

#include <cstdint>
#include <memory>

#include "core/device.h"
#include "core/tensor.h"

namespace kiln {

class Event;

class Stream {
 public:
  // The calling thread's current stream on `device`.
  static Stream current(Device device);
  // A new stream on `device` (on CUDA a non-blocking one: no implicit ordering with the
  // default stream); it is destroyed, after its queued work, with its last copy.
  static Stream create(Device device);

  Device device() const { return device_; }
  // The backend's name for it (0: the default stream).
  std::uintptr_t id() const { return id_; }
  // Blocks the host until the work queued on this stream is done.
  void synchronize() const;
  // Later work queued on this stream waits until `event` has completed (no host block);
  // an event never recorded is no constraint.
  void wait(const Event& event) const;

  friend bool operator==(const Stream& a, const Stream& b) {
    return a.device_ == b.device_ && a.id_ == b.id_;
  }

 private:
  Stream(Device device, std::uintptr_t id, std::shared_ptr<void> owner)
      : device_(device), id_(id), owner_(std::move(owner)) {}
  Device device_;
  std::uintptr_t id_;
  std::shared_ptr<void> owner_;  // set for created streams: destroys them
};

// Makes `stream` the calling thread's current stream of its device for a scope, holding
// it meanwhile (StreamGuard on(Stream::create(d)) keeps the new stream alive).
class StreamGuard {
 public:
  explicit StreamGuard(const Stream& stream);
  ~StreamGuard();
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

 private:
  Stream stream_;
  Stream previous_;
};

class Event {
 public:
  // `enable_timing`: elapsed_ms_since works (recording costs a little more).
  explicit Event(bool enable_timing = false) : enable_timing_(enable_timing) {}

  // Completes when the work queued on `stream` before it is done. Recording again moves
  // the event (on CUDA it is created on the stream's device at the first record).
  void record(const Stream& stream);
  bool recorded() const { return handle_ != nullptr || recorded_on_cpu_; }
  // The device of the stream it was last recorded on.
  Device device() const { return device_; }
  // True when the work before the event has finished, or it was never recorded.
  bool query() const;
  // Blocks the host until the event has completed.
  void synchronize() const;
  // Milliseconds from `start` to this event, both recorded with timing and completed
  // (0 on the CPU, where nothing is queued).
  double elapsed_ms_since(const Event& start) const;

 private:
  friend class Stream;
  bool enable_timing_;
  bool recorded_on_cpu_ = false;
  Device device_ = Device::cpu();
  std::shared_ptr<void> handle_;  // the backend's event, destroyed with the last copy
};

// `tensor`'s memory is also used by the work queued on `stream` so far: the allocator will
// not reuse it, once freed, before that work is done. For memory allocated on one stream
// and consumed on another. The stream must outlive the tensor's memory (the allocator
// records an event on it when the memory is freed): record on long-lived streams, such
// as the default one or a prefetcher's.
void record_stream(const Tensor& tensor, const Stream& stream);

}  // namespace kiln
