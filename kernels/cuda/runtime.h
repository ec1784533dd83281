// The CUDA device runtime as Kiln sees it: which GPUs exist, what they are, and which one
// the calling thread is working on.
//
// "No driver" and "no GPU" are not errors here: device_count() returns 0 and says why,
// is_available() is false, and kiln::init() then leaves Device::cuda() unregistered so
// that using it gives "CUDA is not available: <why>" (docs/design.md). Everything else that
// goes wrong in a runtime call is a kiln::Error (cuda_check.h).
//
// Device selection follows the runtime's model: each host thread has a current device.
// DeviceGuard switches it for a scope and restores the previous one, so a backend call
// on cuda:1 never leaves the caller's thread pointing at cuda:1.
#pragma once

#include <cstddef>
#include <string>

namespace kiln::cuda {

// Number of usable CUDA devices; 0 with `reason` set when there are none. Never throws.
int device_count(std::string* reason = nullptr);
// device_count() > 0, cached after the first call.
bool is_available();

// What a device is, read once with cudaGetDeviceProperties.
struct DeviceProperties {
  std::string name;                // "NVIDIA H100 80GB HBM3"
  int major = 0, minor = 0;        // compute capability, 9.0 for Hopper
  size_t total_memory = 0;         // bytes
  int multiprocessors = 0;
  int max_threads_per_block = 0;
  int max_threads_per_multiprocessor = 0;
  size_t shared_memory_per_block = 0;        // bytes, default (non-opt-in) limit
  size_t shared_memory_per_block_optin = 0;  // bytes, with cudaFuncAttributeMaxDynamicSharedMemorySize
  int l2_cache_bytes = 0;
  int warp_size = 32;
  int memory_clock_khz = 0;        // 0 where the runtime no longer reports it
  int memory_bus_width_bits = 0;
};

// The properties of device `device` (cached); a kiln::Error for an index out of range.
const DeviceProperties& device_properties(int device);
// Throws "cuda: device index N is out of range (this machine has M CUDA devices)".
void check_device_index(int device);

// The calling thread's current device, and switching it.
int current_device();
void set_device(int device);

// Makes `device` current for the guard's lifetime and restores the previous device after.
// Setting the device that is already current costs nothing (no runtime call).
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_;
  int device_;
};

// Waits for all work on `device` (every stream) to finish: cudaDeviceSynchronize.
void synchronize(int device);

// Versions for `kiln info` and error reports, e.g. 12080 for CUDA 12.8 (0 when no driver).
int runtime_version();
int driver_version();

}  // namespace kiln::cuda
