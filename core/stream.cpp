// kiln::Stream, StreamGuard, Event and record_stream over the backend's stream hooks.
#include "core/stream.h"

#include "core/backend.h"
#include "core/error.h"
#include "core/host_sync.h"

namespace kiln {

Stream Stream::current(Device device) {
  return Stream(device, backend(device).current_stream(device.index), nullptr);
}

Stream Stream::create(Device device) {
  Backend& b = backend(device);
  const std::uintptr_t id = b.create_stream(device.index);
  if (id == 0) return Stream(device, 0, nullptr);  // a device without queues
  // The owner destroys the stream (after its queued work) with the last copy.
  std::shared_ptr<void> owner(reinterpret_cast<void*>(id), [&b, device](void* handle) {
    b.destroy_stream(device.index, reinterpret_cast<std::uintptr_t>(handle));
  });
  return Stream(device, id, std::move(owner));
}

void Stream::synchronize() const {
  if (!device_.is_cpu()) note_host_sync(HostSync::Synchronize, device_);
  backend(device_).synchronize_stream(device_.index, id_);
}

void Stream::wait(const Event& event) const {
  if (event.handle_ == nullptr) return;
  KILN_CHECK(event.device_ == device_, "Stream::wait: an event recorded on ", event.device_,
             " cannot order a stream of ", device_);
  backend(device_).stream_wait_event(device_.index, id_, event.handle_.get());
}

StreamGuard::StreamGuard(const Stream& stream)
    : stream_(stream), previous_(Stream::current(stream.device())) {
  backend(stream.device()).set_current_stream(stream.device().index, stream.id());
}

StreamGuard::~StreamGuard() {
  backend(previous_.device()).set_current_stream(previous_.device().index, previous_.id());
}

void Event::record(const Stream& stream) {
  Backend& b = backend(stream.device());
  if (handle_ == nullptr || device_ != stream.device()) {
    void* handle = b.create_event(stream.device().index, enable_timing_);
    if (handle == nullptr) {  // a device without queues: done as soon as recorded
      handle_.reset();
      recorded_on_cpu_ = true;
      device_ = stream.device();
      return;
    }
    handle_ = std::shared_ptr<void>(handle, [&b](void* h) { b.destroy_event(h); });
    device_ = stream.device();
  }
  b.record_event(handle_.get(), device_.index, stream.id());
}

bool Event::query() const { return handle_ == nullptr || backend(device_).event_query(handle_.get()); }

void Event::synchronize() const {
  if (handle_ == nullptr) return;
  note_host_sync(HostSync::Synchronize, device_);
  backend(device_).event_synchronize(handle_.get());
}

double Event::elapsed_ms_since(const Event& start) const {
  KILN_CHECK(recorded() && start.recorded(), "Event::elapsed_ms_since: both events must be recorded");
  if (handle_ == nullptr || start.handle_ == nullptr) return 0.0;
  KILN_CHECK(enable_timing_ && start.enable_timing_,
             "Event::elapsed_ms_since: both events need enable_timing");
  KILN_CHECK(device_ == start.device_, "Event::elapsed_ms_since: events of ", start.device_, " and ",
             device_);
  return backend(device_).event_elapsed_ms(start.handle_.get(), handle_.get());
}

void record_stream(const Tensor& tensor, const Stream& stream) {
  KILN_CHECK(tensor.device() == stream.device(), "record_stream: a tensor on ", tensor.device(),
             " and a stream of ", stream.device());
  backend(stream.device()).record_stream(tensor.storage(), stream.device().index, stream.id());
}

}  // namespace kiln
