// thread_local_per_device<T>(device): the calling thread's own T for one GPU, made on
// first use as T(device) and destroyed when the thread exits. Library handles (cuBLAS,
// cuDNN) are not safe to share between threads that may use them at once, and each
// belongs to one device, so each (thread, device) pair gets its own; one thread_local
// vector per T, indexed by device, is the whole map.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "kernels/cuda/runtime.h"

namespace kiln::cuda {

template <typename T>
T& thread_local_per_device(int device) {
  thread_local std::vector<std::unique_ptr<T>> objects;  // indexed by device
  check_device_index(device);
  const auto index = static_cast<size_t>(device);
  if (objects.size() <= index) objects.resize(index + 1);
  if (!objects[index]) objects[index] = std::make_unique<T>(device);
  return *objects[index];
}

}  // namespace kiln::cuda
