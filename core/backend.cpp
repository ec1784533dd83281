// The backend registry: which Backend serves each device type (filled by kiln::init()).
#include "core/backend.h"

#include <array>
#include <atomic>
#include <mutex>
#include <string>

#include "core/dispatch.h"
#include "core/host_sync.h"

namespace kiln {
namespace {

// The backends are read by every op, so they are atomics read without the lock (one
// acquire load); the lock orders writers and guards the reason string.
struct Registry {
  std::mutex mutex;
  std::array<std::atomic<Backend*>, kNumDeviceTypes> backends{};
  std::string cuda_unavailable_reason = "Kiln was built without the CUDA backend (KILN_CUDA=OFF or no CUDA toolkit)";
};

Registry& registry() {
  static Registry r;
  return r;
}

}  // namespace

void register_backend(DeviceType type, Backend* backend) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  r.backends[static_cast<size_t>(type)].store(backend, std::memory_order_release);
}

bool has_backend(DeviceType type) {
  return registry().backends[static_cast<size_t>(type)].load(std::memory_order_acquire) != nullptr;
}

void set_cuda_unavailable_reason(std::string reason) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  r.cuda_unavailable_reason = std::move(reason);
}

std::string cuda_unavailable_reason() {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  return r.cuda_unavailable_reason;
}

namespace {
[[noreturn]] void no_graphs() {
  KILN_CHECK(false, "CUDA graphs: this device's backend has no graphs (they need a CUDA device)");
  __builtin_unreachable();
}
}  // namespace

void* Backend::create_graph(int /*device_index*/) { no_graphs(); }
void Backend::graph_capture_begin(void* /*graph*/) { no_graphs(); }
void Backend::graph_capture_end(void* /*graph*/) { no_graphs(); }
void Backend::graph_capture_abandon(void* /*graph*/) { no_graphs(); }
void Backend::graph_replay(void* /*graph*/) { no_graphs(); }

AllocatorStats memory_stats(Device device) { return backend(device).memory_stats(device.index); }

void reset_peak_memory_stats(Device device) { backend(device).reset_peak_memory_stats(device.index); }

Backend& backend(Device device) {
  Registry& r = registry();
  Backend* b = r.backends[static_cast<size_t>(device.type)].load(std::memory_order_acquire);
  if (b == nullptr) {
    KILN_CHECK(device.is_cuda(), "no backend registered for ", device,
               ": call kiln::init() once at program start (kiln/init.h)");
    KILN_CHECK(false, "CUDA is not available: ", cuda_unavailable_reason(), " (asked for ", device, ")");
  }
  return *b;
}

bool cuda_is_available() { return has_backend(DeviceType::CUDA); }

int cuda_device_count() { return cuda_is_available() ? backend(Device::cuda()).device_count() : 0; }

void synchronize(Device device) {
  if (!device.is_cpu()) note_host_sync(HostSync::Synchronize, device);
  backend(device).synchronize(device.index);
}

const char* op_name(ReduceOp op) {
  static constexpr const char* kNames[] = {"sum", "mean", "amax", "amin", "norm", "norm"};
  return kNames[static_cast<int>(op)];
}

cudnn::SaveReport Backend::save_conv_algorithm_cache(const std::string& path) {
  KILN_CHECK(false, "save_algorithm_cache: this backend has no convolution algorithm cache (", path, ")");
  return {};
}

cudnn::LoadReport Backend::load_conv_algorithm_cache(const std::string& path) {
  KILN_CHECK(false, "load_algorithm_cache: this backend has no convolution algorithm cache (", path, ")");
  return {};
}

void throw_unsupported_dtype(const char* op, DType dtype) {
  KILN_CHECK(false, op, ": unsupported dtype ", dtype);
  __builtin_unreachable();
}

}  // namespace kiln
