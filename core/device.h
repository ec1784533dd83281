// Device: where a tensor's memory lives, {CPU, CUDA:i}.
//
// Naming Device::cuda(i) is always valid, even without a GPU; using it then fails with a
// clear "CUDA is not available" error from the backend registry (core/backend.cpp).
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

namespace kiln {

enum class DeviceType : uint8_t { CPU, CUDA };
inline constexpr int kNumDeviceTypes = 2;

struct Device {
  DeviceType type = DeviceType::CPU;
  int index = 0;

  static Device cpu() { return {DeviceType::CPU, 0}; }
  static Device cuda(int index = 0) { return {DeviceType::CUDA, index}; }
  // Parses "cpu", "cuda", "cuda:1"; throws kiln::Error otherwise.
  static Device parse(const std::string& text);

  bool is_cpu() const { return type == DeviceType::CPU; }
  bool is_cuda() const { return type == DeviceType::CUDA; }
  std::string str() const;  // "cpu", "cuda:0"
  const char* type_name() const { return is_cpu() ? "cpu" : "cuda"; }

  friend bool operator==(const Device&, const Device&) = default;
};

std::ostream& operator<<(std::ostream& os, const Device& device);

}  // namespace kiln
