// Device discovery, properties and the current device (runtime.h), over the CUDA runtime
// API. Discovery turns every failure into a reason string; the rest is checked.
#include "kernels/cuda/runtime.h"

#include <cuda_runtime_api.h>

#include <memory>
#include <mutex>
#include <vector>

#include "core/error.h"
#include "kernels/cuda/cuda_check.h"

namespace kiln::cuda {

int device_count(std::string* reason) {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    if (reason) *reason = std::string("cudaGetDeviceCount failed: ") + cudaGetErrorString(status);
    cudaGetLastError();  // clear the error state
    return 0;
  }
  if (count == 0 && reason) *reason = "no CUDA device found";
  return count;
}

bool is_available() {
  static const bool available = device_count() > 0;
  return available;
}

void check_device_index(int device) {
  static const int count = device_count();
  KILN_CHECK(device >= 0 && device < count, "cuda: device index ", device, " is out of range (this machine has ",
             count, " CUDA device", count == 1 ? "" : "s", ")");
}

namespace {

DeviceProperties read_properties(int device) {
  cudaDeviceProp p{};
  KILN_CUDA_CHECK(cudaGetDeviceProperties(&p, device));
  DeviceProperties d;
  d.name = p.name;
  d.major = p.major;
  d.minor = p.minor;
  d.total_memory = p.totalGlobalMem;
  d.multiprocessors = p.multiProcessorCount;
  d.max_threads_per_block = p.maxThreadsPerBlock;
  d.max_threads_per_multiprocessor = p.maxThreadsPerMultiProcessor;
  d.shared_memory_per_block = p.sharedMemPerBlock;
  d.shared_memory_per_block_optin = p.sharedMemPerBlockOptin;
  d.l2_cache_bytes = p.l2CacheSize;
  d.warp_size = p.warpSize;
  d.memory_bus_width_bits = p.memoryBusWidth;
  int clock_khz = 0;  // cudaDeviceProp::memoryClockRate is gone from CUDA 13; ask the attribute
  if (cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, device) == cudaSuccess) {
    d.memory_clock_khz = clock_khz;
  } else {
    cudaGetLastError();
  }
  return d;
}

}  // namespace

const DeviceProperties& device_properties(int device) {
  check_device_index(device);
  static std::mutex mutex;
  static std::vector<std::unique_ptr<DeviceProperties>> cache(static_cast<size_t>(device_count()));
  std::lock_guard lock(mutex);
  auto& slot = cache[static_cast<size_t>(device)];
  if (!slot) slot = std::make_unique<DeviceProperties>(read_properties(device));
  return *slot;
}

int current_device() {
  int device = 0;
  KILN_CUDA_CHECK(cudaGetDevice(&device));
  return device;
}

void set_device(int device) {
  check_device_index(device);
  KILN_CUDA_CHECK(cudaSetDevice(device));
}

DeviceGuard::DeviceGuard(int device) : previous_(current_device()), device_(device) {
  if (device_ != previous_) set_device(device_);
}

DeviceGuard::~DeviceGuard() {
  if (device_ != previous_) cudaSetDevice(previous_);  // a destructor must not throw
}

void synchronize(int device) {
  DeviceGuard guard(device);
  KILN_CUDA_CHECK(cudaDeviceSynchronize());
}

int runtime_version() {
  int v = 0;
  if (cudaRuntimeGetVersion(&v) != cudaSuccess) cudaGetLastError();
  return v;
}

int driver_version() {
  int v = 0;
  if (cudaDriverGetVersion(&v) != cudaSuccess) cudaGetLastError();
  return v;
}

}  // namespace kiln::cuda
