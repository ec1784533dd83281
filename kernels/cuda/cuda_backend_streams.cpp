// CudaBackend's streams and events (the Backend hooks behind core/stream.h): thin
// forwards to stream.h, event.h and the caching allocator's record_stream. A stream is
// named by its cudaStream_t (0: the legacy default stream), so the current-stream table,
// the allocator's per-stream pools and the public kiln::Stream agree on one name; the
// streams this backend creates are kept, by that name, until destroyed.
#include <cuda_runtime_api.h>

#include <map>
#include <memory>
#include <mutex>

#include "core/error.h"
#include "kernels/cuda/caching_allocator.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/event.h"
#include "kernels/cuda/stream.h"

namespace kiln::cuda {
namespace {

Stream stream_of(int device, std::uintptr_t id) { return Stream(device, reinterpret_cast<cudaStream_t>(id)); }
std::uintptr_t id_of(Stream stream) { return reinterpret_cast<std::uintptr_t>(stream.handle()); }

// The streams made by create_stream, by name (leaked on purpose: Note [Leaked allocators]).
struct CreatedStreams {
  std::mutex mutex;
  std::map<std::uintptr_t, std::unique_ptr<OwnedStream>> streams;
};
CreatedStreams& created_streams() {
  static auto* streams = new CreatedStreams;
  return *streams;
}

Event& event_of(void* event) { return *static_cast<Event*>(event); }

}  // namespace

std::uintptr_t CudaBackend::create_stream(int device_index) {
  auto stream = std::make_unique<OwnedStream>(device_index);
  const std::uintptr_t id = id_of(stream->stream());
  CreatedStreams& created = created_streams();
  std::lock_guard lock(created.mutex);
  created.streams[id] = std::move(stream);
  return id;
}

void CudaBackend::destroy_stream(int /*device_index*/, std::uintptr_t stream) {
  std::unique_ptr<OwnedStream> owned;  // destroyed (after its work) outside the lock
  CreatedStreams& created = created_streams();
  std::lock_guard lock(created.mutex);
  const auto it = created.streams.find(stream);
  KILN_ASSERT(it != created.streams.end(), "cuda: destroying a stream this backend did not create");
  owned = std::move(it->second);
  created.streams.erase(it);
}

std::uintptr_t CudaBackend::current_stream(int device_index) const {
  return id_of(cuda::current_stream(device_index));
}

void CudaBackend::set_current_stream(int device_index, std::uintptr_t stream) {
  cuda::set_current_stream(stream_of(device_index, stream));
}

void CudaBackend::synchronize_stream(int device_index, std::uintptr_t stream) {
  stream_of(device_index, stream).synchronize();
}

void* CudaBackend::create_event(int /*device_index*/, bool enable_timing) { return new Event(enable_timing); }

void CudaBackend::destroy_event(void* event) { delete static_cast<Event*>(event); }

void CudaBackend::record_event(void* event, int device_index, std::uintptr_t stream) {
  event_of(event).record(stream_of(device_index, stream));
}

void CudaBackend::stream_wait_event(int device_index, std::uintptr_t stream, void* event) {
  event_of(event).block(stream_of(device_index, stream));
}

bool CudaBackend::event_query(void* event) { return event_of(event).query(); }

void CudaBackend::event_synchronize(void* event) { event_of(event).synchronize(); }

double CudaBackend::event_elapsed_ms(void* start, void* end) {
  return event_of(end).elapsed_ms_since(event_of(start));
}

void CudaBackend::record_stream(const Storage& storage, int device_index, std::uintptr_t stream) {
  if (storage.data() == nullptr) return;  // an empty tensor: no memory to keep
  cuda::record_stream(storage.data(), stream_of(device_index, stream));
}

}  // namespace kiln::cuda
